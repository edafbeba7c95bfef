"""One request's story from a case database: `kvforensics explain` and the report's OUT/explain/
pages.

Read-only, like the report: the case database is opened read-only, a table a stage did not write
gets an empty TEMP stand-in (forensics.report.casedb.stand_ins) and a table of an older case
database that lacks a column the current schema has gets a TEMP copy with that column as NULLs
(`column_stand_ins`); both are named in the explanation. The queries (queries/explain/*.sql) read
the requests to explain from one TEMP table, so the pages of many requests cost one pass over
each table, not one per request."""

from __future__ import annotations

from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb

from forensics.base.isotime import iso_utc
from forensics.base.textsafe import visible
from forensics.casedb.sql import run, sql, tables
from forensics.db import rows
from forensics.errors import CaseError
from forensics.notify.notices import file_stems
from forensics.report.casedb import column_stand_ins, stand_ins

# The tables explain reads besides the ledger (whose rows are only summarised; a ledger kept
# outside the case is a view and is never copied).
READS = (
    "requests",
    "accounts",
    "node_evidence",
    "screening",
    "counter_windows",
    "counter_window_requests",
    "exposures",
    "exposure_tokens",
    "possible_exposures",
    "reconstructed_exposures",
    "reconstructed_other_ways",
    "replay_results",
    "affected_requests",
    "cleared_findings",
)
POSSIBLE_LIMIT = 50  # possible pairs listed per request and side (all are counted)
PAGE_LIMIT = 200  # explain pages the report writes at most
SUGGESTIONS = 5


@dataclass(frozen=True)
class StoryEvent:
    """One line of a request's story, in time order."""

    at: datetime | None
    event: str  # arrival | first-token | completion | ledger | read | read-by | reconstructed
    node: str | None
    text: str
    clock: str  # gateway | node (the node's own clock) | reconstructed


@dataclass
class Explanation:
    """Everything the case database says about one request."""

    request_id: str
    request: dict[str, Any]  # its gateway row, with its account's name and log_rows
    story: list[StoryEvent]
    nodes: list[dict[str, Any]]  # the nodes it ran on and the evidence each was judged on
    screening: dict[str, Any] | None
    kv_events: list[dict[str, Any]]  # per node and op: events, slots, merged ranges, times
    read: list[dict[str, Any]]  # whose KV it read (exposures, per leaker, node and kind)
    read_by: list[dict[str, Any]]  # who read its KV (it is a leaker)
    possible: list[dict[str, Any]]  # possible (screened) pairs, bounded
    possible_counts: list[dict[str, Any]]  # all possible pairs, per side and basis
    reconstructed: list[dict[str, Any]]
    replay: list[dict[str, Any]]
    affected: list[dict[str, Any]]  # its notification-list rows, both sides
    cleared: list[dict[str, Any]]
    missing_tables: list[str] = field(default_factory=list)
    missing_columns: dict[str, list[str]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """A stable, machine-readable object: times ISO-8601 UTC, keys sorted by the printer."""
        return {
            "request_id": self.request_id,
            "request": _plain(self.request),
            "story": [_plain(e.__dict__) for e in self.story],
            "nodes": _plain(self.nodes),
            "screening": _plain(self.screening),
            "kv_events": _plain(self.kv_events),
            "read": _plain(self.read),
            "read_by": _plain(self.read_by),
            "possible": _plain(self.possible),
            "possible_counts": _plain(self.possible_counts),
            "reconstructed": _plain(self.reconstructed),
            "replay": _plain(self.replay),
            "affected": _plain(self.affected),
            "cleared": _plain(self.cleared),
            "missing_tables": self.missing_tables,
            "missing_columns": self.missing_columns,
        }

    @property
    def leakers(self) -> list[str]:
        """The requests whose KV it read (ledger exposures), sorted."""
        return sorted({str(r["other_request_id"]) for r in self.read})


def _plain(value: Any) -> Any:
    if isinstance(value, datetime):
        return iso_utc(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _part(
    con: duckdb.DuckDBPyConnection, name: str, params: dict[str, Any] | None
) -> list[dict[str, Any]] | None:
    """One part's rows; None for the KV events of a ledger kept outside the case database that
    this connection cannot read (a read-only one that did not attach it): the story then has
    no KV events, and says so."""
    try:
        return rows(con, f"explain/{name}", params)
    except duckdb.Error:
        if name != "kv_events":
            raise
        return None


# What the stories say when the KV events could not be read on the connection.
LEDGER_UNREAD = "kv_events (the ledger is kept outside the case database and is not read here)"


def _read_parts(
    con: duckdb.DuckDBPyConnection, request_ids: list[str]
) -> tuple[dict[str, list[dict[str, Any]]], dict[str, dict[str, list[dict[str, Any]]]], list[str]]:
    """The gateway rows and every other part, per request id; the parts that could not be read
    (the KV events of a ledger kept outside the case database)."""
    run(con, "explain/ids", {"ids": list(request_ids)})
    try:
        found = _by_request(rows(con, "explain/request"))
        got = {
            name: _part(con, name, params)
            for name, params in (
                ("nodes", None),
                ("screening", None),
                ("kv_events", None),
                ("exposures", None),
                ("possible", {"limit": POSSIBLE_LIMIT}),
                ("possible_counts", None),
                ("reconstructed", None),
                ("replay", None),
                ("affected", None),
                ("cleared", None),
            )
        }
    finally:
        con.execute(sql("explain/cleanup"))
    parts = {name: _by_request(found_rows or []) for name, found_rows in got.items()}
    unread = [LEDGER_UNREAD] if got["kv_events"] is None else []
    return found, parts, unread


def _by_request(found: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for row in found:
        out.setdefault(str(row.pop("request_id")), []).append(row)
    return out


def _sides(
    pairs: list[dict[str, Any]],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Exposure rows split by side: (whose KV it read, who read its KV), side dropped."""
    out: dict[str, list[dict[str, Any]]] = {"read": [], "read-by": []}
    for row in pairs:
        out[str(row.pop("side"))].append(row)
    return out["read"], out["read-by"]


def _ranges(ranges: list[dict[str, Any]] | None) -> str:
    """Merged slot ranges as text: '17-226, 256-257'."""
    parts = []
    for r in ranges or []:
        first, last = r["first"], r["last"]
        parts.append(str(first) if first == last else f"{first}-{last}")
    return ", ".join(parts)


def _gateway_events(request: dict[str, Any]) -> list[tuple[int, StoryEvent]]:
    """Arrival, first token and completion, as the gateway logged them."""
    decode = request.get("decode_node") or request.get("node")
    done = (
        f"response completed, HTTP {request['http_status']}, "
        f"{request.get('completion_tokens')} output token(s)"
    )
    found = [
        (
            0,
            request["received_at"],
            "arrival",
            request.get("prefill_node") or request.get("node"),
            _arrival(request),
        ),
        (5, request.get("first_token_at"), "first-token", decode, "first token sent"),
        (6, request.get("completed_at"), "completion", decode, done),
    ]
    return [
        (o, StoryEvent(at, kind, node, text, "gateway"))
        for o, at, kind, node, text in found
        if at is not None
    ]


def _pair_text(verb: str, row: dict[str, Any]) -> str:
    return (
        f"{verb} {row['other_request_id']} (account {row['other_account_id'] or 'unknown'}): "
        f"{row['kind']}, {row['slots']} slot(s) {_ranges(row['ranges'])}"
    )


def _story(
    request: dict[str, Any],
    kv: list[dict[str, Any]],
    read: list[dict[str, Any]],
    read_by: list[dict[str, Any]],
    rebuilt: list[dict[str, Any]],
) -> list[StoryEvent]:
    """The request's events in time order (gateway times and each node's own clock mixed: the
    clock field says which)."""
    events = _gateway_events(request)
    for k in kv:
        text = f"{k['op']}: {k['events']} event(s), {k['slots']} slot(s) {_ranges(k['ranges'])}"
        at = _utc(k["first_at"])  # a ledger read in place gives its times without a zone
        events.append((1, StoryEvent(at, "ledger", k["node"], text, "node")))
    for e in read:
        text = _pair_text("read KV of", e) + f", written from {iso_utc(e['first_write_at'])}"
        events.append((2, StoryEvent(e["first_read_at"], "read", e["node"], text, "node")))
    for e in read_by:
        text = _pair_text("its KV read by", e)
        events.append((3, StoryEvent(e["first_read_at"], "read-by", e["node"], text, "node")))
    for p in rebuilt:
        who = "read KV of" if p["side"] == "receiving" else "its KV read by"
        text = (
            f"{who} {p['other_request_id']} in the reconstructed trace "
            f"({p['tokens']} slot(s), support {p['support']:.2f})"
        )
        if p.get("kept_apart"):
            text += (
                "; only in runs of a free list the node's SGLang release does not build: "
                "kept apart, not listed"
            )
        events.append(
            (4, StoryEvent(p["read_at"], "reconstructed", p["node"], text, "reconstructed"))
        )
    events.sort(key=lambda e: (e[1].at is None, e[1].at or datetime.min, e[0], e[1].text))
    return [event for _, event in events]


def _utc(value: datetime | None) -> datetime | None:
    """A time without a zone taken as UTC (how the ledger's times are stored)."""
    return value.replace(tzinfo=UTC) if value is not None and value.tzinfo is None else value


def _arrival(request: dict[str, Any]) -> str:
    nodes = ", ".join(
        f"{part} {request[key]}"
        for part, key in (("prefill", "prefill_node"), ("decode", "decode_node"), ("node", "node"))
        if request.get(key)
    )
    return (
        f"received from account {request['account_id']}: {request['prompt_tokens']} prompt "
        f"token(s), model {request['model']}" + (f"; {nodes}" if nodes else "")
    )


def explain_requests(
    con: duckdb.DuckDBPyConnection, request_ids: list[str], missing: list[str] | None = None
) -> dict[str, Explanation]:
    """The explanation of each request of the request log among `request_ids` (ids the log
    lacks are left out). `missing`: the tables the caller has given stand-ins (the report
    does); None: missing tables get stand-ins for the time of the call. Columns an older case
    database lacks get stand-ins either way."""
    with ExitStack() as stack:
        if missing is None:
            missing = stack.enter_context(stand_ins(con))
        lacking = stack.enter_context(column_stand_ins(con, READS))
        found, parts, unread = _read_parts(con, request_ids)
    out: dict[str, Explanation] = {}
    for request_id, (request,) in sorted(found.items()):
        request["request_id"] = request_id

        def part(name: str, rid: str = request_id) -> list[dict[str, Any]]:
            return parts[name].get(rid, [])

        screening = part("screening")
        read, read_by = _sides(part("exposures"))
        out[request_id] = Explanation(
            request_id=request_id,
            request=request,
            story=_story(
                request,
                part("kv_events"),
                read,
                read_by,
                part("reconstructed"),
            ),
            nodes=part("nodes"),
            screening=screening[0] if screening else None,
            kv_events=part("kv_events"),
            read=read,
            read_by=read_by,
            possible=part("possible"),
            possible_counts=part("possible_counts"),
            reconstructed=part("reconstructed"),
            replay=part("replay"),
            affected=part("affected"),
            cleared=part("cleared"),
            missing_tables=[*missing, *unread],
            missing_columns=lacking,
        )
    return out


def similar_ids(con: duckdb.DuckDBPyConnection, request_id: str) -> list[str]:
    """Request ids of the log close to one it lacks, for a did-you-mean."""
    found = rows(con, "explain/similar", {"id": request_id, "limit": SUGGESTIONS})
    return [str(r["request_id"]) for r in found]


def explain_one(con: duckdb.DuckDBPyConnection, request_id: str) -> Explanation:
    """The explanation of one request; CaseError (exit 2) naming close ids when the request log
    does not have it."""
    found = explain_requests(con, [request_id]).get(request_id)
    if found is not None:
        return found
    close = similar_ids(con, request_id) if "requests" in tables(con) else []
    hint = f"; did you mean {', '.join(close)}?" if close else "; no request id is close to it"
    raise CaseError(f"request {request_id!r} is not in the case's request log{hint}")


def page_names(request_ids: list[str]) -> dict[str, str]:
    """explain/<name>.html per request id: the id itself when it is a plain, safe file name,
    else its characters replaced and part of its SHA-256 appended (as notices name accounts)."""
    return {rid: f"{stem}.html" for rid, stem in file_stems(request_ids).items()}


def render_page(explanation: Explanation, *, generated_at: str = "") -> str:
    """The self-contained HTML page of one explanation (templates/explain.html)."""
    from forensics.report.render import environment

    template = environment().get_template("explain.html")
    return template.render(
        x=explanation, generated_at=generated_at, ranges=_ranges, oneline=_oneline
    )


def _oneline(value: Any) -> str:
    """A value on one line, its controls (newlines too) shown as escapes."""
    return visible(str(value), keep_newlines=False)


def write_pages(
    con: duckdb.DuckDBPyConnection,
    folder: Path,
    request_ids: list[str],
    *,
    generated_at: str = "",
    limit: int = PAGE_LIMIT,
    missing: list[str] | None = None,
) -> dict[str, Path]:
    """Write folder/<name>.html for the first `limit` of request_ids (in the order given) that
    the request log has; return {request id: path}. `missing`: as for explain_requests."""
    chosen = list(dict.fromkeys(request_ids))[:limit]
    if not chosen:
        return {}
    found = explain_requests(con, chosen, missing)
    names = page_names(sorted(found))
    folder.mkdir(parents=True, exist_ok=True)
    written: dict[str, Path] = {}
    for rid in chosen:
        if rid not in found:
            continue
        path = folder / names[rid]
        path.write_text(render_page(found[rid], generated_at=generated_at), encoding="utf-8")
        written[rid] = path
    return written
