"""The tap's own reports on what it could not record, read as evidence of holes in a ledger.

A tap folder (`kvforensics tap`) holds, beside the ledger parts in kv_events/node=NAME/:

- `tap/gaps-<stem>.jsonl`: one line per batch the recorder dropped because its writer fell
  behind (`ts` of the drop, `node`, `kind` events or contents, `dropped`, and for events
  `first_seq` / `last_seq`);
- `tap/status-<stem>.json`: the recording process's counts (`events_recorded`,
  `events_written`, `events_dropped`), rewritten every few seconds and at the end;
- `<stem>-NNNNN.parquet.tmp` among the parts: a part a tap was still writing when it was
  stopped; its events are lost (ingest does not read it).

The stem is `<node>-<start second>-<pid>`; the start second is the run of the seq numbers the
process gave (seq >> 32). Each report becomes a row of tap_reports (a line that cannot be read
is quarantined with its reason); queries/analysis/ledger_holes_tap.sql turns them into holes."""

from __future__ import annotations

import json
import re
from pathlib import Path, PurePosixPath
from typing import Any

import duckdb
import pyarrow as pa

from forensics.base.arrow import table_of
from forensics.case.discover import UNFINISHED, outside_case
from forensics.case.result import FileCounts
from forensics.casedb.sql import run_script, sql

FOLDER = "tap"
_STEM = re.compile(r"^(?P<node>.*)-(?P<run>\d{10})-(?P<pid>\d+)(?:-\d+)?$")
_REPORT = re.compile(r"^(gaps-.+\.jsonl|status-.+\.json)$")

COLUMNS = pa.schema(
    [
        ("file", pa.string()),
        ("line", pa.int64()),
        ("kind", pa.string()),
        ("node", pa.string()),
        ("run", pa.int64()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("first_seq", pa.int64()),
        ("last_seq", pa.int64()),
        ("dropped", pa.int64()),
        ("recorded", pa.int64()),
        ("written", pa.int64()),
    ]
)


def tap_files(case_dir: Path, follow_links: bool = False) -> list[str]:
    """The tap's reports in the case's tap/ folder (relative paths). A link that leads outside
    the case folder is not read unless follow_links is true."""
    folder = case_dir / FOLDER
    if not folder.is_dir():
        return []
    root = case_dir.resolve()
    return sorted(
        p.relative_to(case_dir).as_posix()
        for p in folder.iterdir()
        if p.is_file() and _REPORT.match(p.name) and (follow_links or not outside_case(p, root))
    )


def unfinished_parts(skipped: list[tuple[str, str]]) -> list[str]:
    """The unfinished ledger parts among the files discovery skipped."""
    return sorted(rel for rel, why in skipped if why == UNFINISHED)


def load_tap(
    con: duckdb.DuckDBPyConnection,
    case_dir: Path,
    hashes: dict[str, str],
    unfinished: list[str],
) -> dict[str, FileCounts]:
    """tap_reports from the reports and the unfinished parts; the counts of each report file."""
    rows: list[dict[str, Any]] = []
    counts: dict[str, FileCounts] = {}
    quarantined: list[dict[str, Any]] = []
    for rel in sorted(r for r in hashes if r.startswith(f"{FOLDER}/")):
        got, bad, read = _read_report(case_dir / rel, rel)
        rows.extend(got)
        quarantined.extend(bad)
        counts[rel] = FileCounts(
            rel, "tap", hashes[rel], (case_dir / rel).stat().st_size, read, len(got), len(bad)
        )
    for rel in unfinished:
        rows.append(_unfinished_row(rel))
    con.register("_tap_rows", table_of(rows, COLUMNS))  # without pyarrow's pandas conversions
    con.register("_tap_bad", table_of(quarantined, _BAD))
    try:
        run_script(con, sql("ingest/tap_reports_insert"))
    finally:
        con.unregister("_tap_rows")
        con.unregister("_tap_bad")
    return counts


_BAD = pa.schema([("file", pa.string()), ("row", pa.int64()), ("reason", pa.string())])


def _read_report(path: Path, rel: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]], int]:
    """(rows, quarantined lines, lines read) of one gaps or status file."""
    text = path.read_text(encoding="utf-8", errors="replace")
    stem = PurePosixPath(rel).name.split("-", 1)[1].rsplit(".", 1)[0]
    run = _run_of(stem)
    if path.name.startswith("status-"):
        records = [(1, text)] if text.strip() else []
    else:
        records = [(n, line) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
    rows, bad = [], []
    for n, raw in records:
        try:
            rec = json.loads(raw)
            if not isinstance(rec, dict):
                raise ValueError("not a JSON object")
            rows.append(_row(rel, n, rec, run, status=path.name.startswith("status-")))
        except (ValueError, TypeError, OverflowError) as exc:
            bad.append(
                {
                    "file": rel,
                    "row": n,
                    "reason": f"a tap report that cannot be read ({exc}); its hole, if any, is "
                    "not known: fix or restore the line from the tap's host",
                }
            )
    return rows, bad, len(records)


def _row(rel: str, n: int, rec: dict[str, Any], run: int | None, status: bool) -> dict[str, Any]:
    node = rec.get("node")
    if not isinstance(node, str) or not node.strip():
        raise ValueError("no node")

    def num(key: str) -> int | None:
        v = rec.get(key)
        if v is None:
            return None
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < 1 << 63:
            raise ValueError(f"{key} is not a whole number from 0 to 2^63 - 1")
        return v

    return {
        "file": rel,
        "line": n,
        "kind": "status"
        if status
        else ("dropped" if rec.get("kind", "events") == "events" else "dropped-contents"),
        "node": node.strip(),
        "run": run,
        "ts": num("ts"),
        "first_seq": num("first_seq"),
        "last_seq": num("last_seq"),
        "dropped": num("events_dropped") if status else num("dropped"),
        "recorded": num("events_recorded") if status else None,
        "written": num("events_written") if status else None,
    }


def _unfinished_row(rel: str) -> dict[str, Any]:
    parts = PurePosixPath(rel).parts
    folder = next((p[5:] for p in parts[:-1] if p.startswith("node=")), None)
    stem = parts[-1][: -len(".parquet.tmp")]
    m = _STEM.match(stem)  # its stem and part number: <node>-<start second>-<pid>-NNNNN
    return {
        "file": rel,
        "line": None,
        "kind": "unfinished",
        "node": folder if folder is not None else (m.group("node") if m else None),
        "run": int(m.group("run")) if m else None,
        "ts": None,
        "first_seq": None,
        "last_seq": None,
        "dropped": None,
        "recorded": None,
        "written": None,
    }


def _run_of(stem: str) -> int | None:
    m = _STEM.match(stem)
    return int(m.group("run")) if m else None
