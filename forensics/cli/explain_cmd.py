"""`kvforensics explain`: one request's story from a case database, on the terminal, as JSON
or as a self-contained HTML page."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape

from forensics.base.textsafe import visible
from forensics.cli.app import app, console, emit_json
from forensics.cli.params import Db, Html, Json, RequestId
from forensics.errors import UsageError
from forensics.report.casedb import open_case
from forensics.report.explain import Explanation, explain_one, render_page
from forensics.report.stage import generation_time


def _s(value: Any) -> str:
    """A value from the case, safe to print: controls shown as escapes, no rich markup."""
    return escape(visible("–" if value is None else str(value), keep_newlines=False))


def _print(x: Explanation) -> None:
    r = x.request
    console.print(f"[bold]request {_s(x.request_id)}[/] · account {_s(r['account_id'])}")
    for a in x.affected:
        console.print(
            f"  on the {_s(a['side'])} list: {_s(a['confidence'])}, {_s(a['tokens'])} token(s), "
            f"{_s(a['counterpart_requests'])} other request(s)"
        )
    if not x.affected:
        console.print("  not on the notification lists")
    console.print("[bold]story[/] (gateway times; ledger events on each node's clock)")
    for e in x.story:
        when = e.at.strftime("%Y-%m-%d %H:%M:%S.%f") if e.at else "time unknown"
        console.print(f"  {when}  {_s(e.event):<11} {_s(e.node):<10} {_s(e.text)}")
    console.print("[bold]nodes[/]")
    for n in x.nodes:
        console.print(
            f"  {_s(n['node'])} ({_s(n['parts'])}): {_s(n['evidence'] or 'not judged')}"
            f" — {_s(n['note'])}"
        )
    s = x.screening
    if s is not None:
        console.print(
            f"[bold]screening[/] reasons {_s(', '.join(s['reasons']) or 'none')}; coverage "
            f"{_s(s['coverage'])}; signals {_s(', '.join(s['signals'] or []) or '–')}"
        )
        if s.get("counter_basis"):
            console.print(
                f"  token counters of {_s(s['counter_node'])}: {s['counter_requests']} compared "
                f"request(s) in its window; engine {s['counter_engine_tokens']}, billed "
                f"{s['counter_billed_tokens']} ({_s(s['counter_basis'])}), shortfall "
                f"{s['counter_shortfall']}"
            )
    for title, found in (("read KV of", x.read), ("its KV read by", x.read_by)):
        accounts = {row["other_account_id"] for row in found}
        if found:
            console.print(
                f"[bold]{title}[/] {len({row['other_request_id'] for row in found})} request(s)"
                f" of {len(accounts)} account(s)"
            )
        for row in found:
            console.print(
                f"  {_s(row['other_request_id'])} ({_s(row['other_account_id'])}) on "
                f"{_s(row['node'])}: {_s(row['kind'])}, {_s(row['tokens'])} token(s), "
                f"{_s(row['confidence'])}"
            )
    for c in x.possible_counts:
        console.print(
            f"[bold]possible[/] {_s(c['side'])} {_s(c['basis'])}: {_s(c['pairs'])} pair(s)"
        )
    for p in x.reconstructed:
        console.print(
            f"[bold]reconstructed[/] {_s(p['side'])} {_s(p['other_request_id'])} on "
            f"{_s(p['node'])}: support {p['support']:.2f}, "
            + ("kept apart, not listed" if p.get("kept_apart") else f"verdict {_s(p['verdict'])}")
        )
    for v in x.replay:
        bits = "–" if v["evidence_bits"] is None else f"{v['evidence_bits']:+.1f}"
        console.print(
            f"[bold]replay[/] {_s(v['run_id'])}: {_s(v['verdict'])}"
            f"{' (' + _s(v['basis']) + ')' if v['basis'] else ''}, {bits} bits: {_s(v['reason'])}"
        )
    if not x.replay:
        console.print("[bold]replay[/] not replayed")
    if x.missing_tables or x.missing_columns:
        lacking = [
            *x.missing_tables,
            *(f"{t}.{c}" for t, cs in x.missing_columns.items() for c in cs),
        ]
        console.print(f"not in this case database: {_s(', '.join(lacking))}")


def _check_page_target(html: Path, db: Path) -> None:
    """--html names a file that may be written: not a folder, not the case database (nor its
    write-ahead log), and not an existing file other than an HTML page (evidence, a log)."""
    if html.is_dir():
        raise UsageError(f"--html {html} is a folder; give the path of the page to write")
    if not html.exists():
        return
    if any(
        other.exists() and html.samefile(other) for other in (db, db.with_name(db.name + ".wal"))
    ):
        raise UsageError(f"--html {html} is the case database; give another path for the page")
    with html.open("rb") as handle:
        head = handle.read(len(_PAGE_START))
    if head.lower() != _PAGE_START.lower():
        raise UsageError(
            f"--html {html} exists and is not an HTML page; it is left as it is: give a new path"
        )


_PAGE_START = b"<!DOCTYPE html"


def _write_page(html: Path, page: str) -> None:
    """The page written beside its path and put in place whole."""
    partial = html.with_name(f".{html.name[:200]}.partial-{os.getpid()}")
    try:
        html.parent.mkdir(parents=True, exist_ok=True)
        partial.write_text(page, encoding="utf-8")
        os.replace(partial, html)
    except OSError as exc:
        raise UsageError(f"--html {html}: cannot write the page ({exc.strerror})") from exc
    finally:
        with contextlib.suppress(OSError):
            partial.unlink(missing_ok=True)


@app.command()
def explain(
    request_id: RequestId,
    db: Db,
    json_out: Json = False,
    html: Html = None,
) -> None:
    """One request's story from a case database: arrival, first token and completion, its
    nodes and the evidence each was judged on, its screening, its KV ledger events summarised,
    whose KV it read and who read its own, possible and reconstructed pairs, replay's verdicts
    and its rows on the notification lists. Exit 0 when found, 2 when the id is unknown."""
    if html is not None:
        _check_page_target(html, db)
    con = open_case(db)
    try:
        found = explain_one(con, request_id)
    finally:
        con.close()
    if html is not None:
        _write_page(html, render_page(found, generated_at=generation_time()))
    if json_out:
        emit_json(found.to_json())
    else:
        _print(found)
        if html is not None:
            console.print(f"wrote {_s(html)}")
    raise typer.Exit(0)
