"""Per-request evidence lines (SGLang) and the engine_evidence rows built from them.

| kind                     | request_id          | value              | max_value        |
|--------------------------|---------------------|--------------------|------------------|
| exceeds-max-tokens       | the rid in the line | input tokens       | the limit        |
| input-too-long           | `self.rid='…'`      | input tokens       | the limit        |
| kv-checksum-mismatch     | `req=…`             | checksum got       | checksum expected|
| kv-canary-violation      | (none logged)       | stored token       | expected token   |
| deferred-release-timeout | via bootstrap room  | timeout, seconds   | (none)           |

A deferred release names only its bootstrap room; the request id is filled in when another line
of the same node pairs that room with a request id (a checksum line, a request log line)."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from datetime import datetime

from forensics.logs.specs import Match, Spec, rx, to_int

MESSAGE_LIMIT = 1000  # characters of the message kept in engine_evidence.message

EXCEEDS = Spec(
    "evidence.exceeds-max-tokens",
    "sglang",
    needle="exceeds the maximum number",
    head=rx(r"exceeds the maximum number of tokens"),
    full=rx(
        r"Request (?P<request_id>.+?) exceeds the maximum number of tokens: "
        r"(?P<value>\d+) > (?P<max_value>\d+)\b"
    ),
    partial=(
        rx(r"Request (?P<request_id>.+?) exceeds the maximum number of tokens"),
        rx(r"tokens: (?P<value>\d+) >"),
    ),
)
INPUT_TOO_LONG = Spec(
    "evidence.input-too-long",
    "sglang",
    needle="Input length (",
    head=rx(r"Input length \(\d"),
    full=rx(
        r"Input length \((?P<value>\d+) tokens\) exceeds the maximum allowed length "
        r"\((?P<max_value>\d+) tokens\)"
    ),
    partial=(rx(r"Input length \((?P<value>\d+) tokens\)"),),
    extras=(rx(r"\brid=(?P<q>['\"])(?P<request_id>.*?)(?P=q)"),),
)
CHECKSUM = Spec(
    "evidence.kv-checksum-mismatch",
    "sglang",
    needle="KV checksum mismatch",
    head=rx(r"KV checksum mismatch (?:on a peer rank )?req="),
    full=rx(
        r"KV checksum mismatch (?:on a peer rank )?req=(?P<request_id>\S+) "
        r"bootstrap_room=(?P<bootstrap_room>\d+)"
        r"(?: expected=(?P<max_value>0x[0-9a-fA-F]+) got=(?P<value>0x[0-9a-fA-F]+)\b|\s*$)"
    ),
    partial=(rx(r"req=(?P<request_id>\S+) "), rx(r"bootstrap_room=(?P<bootstrap_room>\d+) ")),
)
CANARY = Spec(
    "evidence.kv-canary-violation",
    "sglang",
    needle="kv_canary violation",
    head=rx(r"kv_canary violation: "),
    full=rx(
        r"kv_canary violation: launch_tag=\S+ fail_reason=\S+ slot_idx=(?P<slot_idx>-?\d+) "
        r"position=(?P<position>-?\d+) stored_token=(?P<value>-?\d+) "
        r"expected_token=(?P<max_value>-?\d+)\b"
    ),
    partial=(rx(r"slot_idx=(?P<slot_idx>-?\d+) "), rx(r"position=(?P<position>-?\d+) ")),
    extras=(rx(r"\b(?:rid|req)=(?P<request_id>[^\s,]+)"),),
)
DEFERRED = Spec(
    "evidence.deferred-release-timeout",
    "sglang",
    needle="Deferred KV release",
    head=rx(r"Deferred KV release for room \d"),
    full=rx(
        r"Deferred KV release for room (?P<bootstrap_room>\d+) timed out after "
        r"(?P<value>[\d.]+)s\b"
    ),
    partial=(rx(r"for room (?P<bootstrap_room>\d+) "),),
)

SPECS: tuple[Spec, ...] = (EXCEEDS, INPUT_TOO_LONG, CHECKSUM, CANARY, DEFERRED)

# Lines that pair a request id with a bootstrap room (request logs in text or JSON form).
_ROOM_PAIRS = (
    (
        re.compile(r"\brid=['\"]?(?P<rid>[^'\",\s)]+)"),
        re.compile(r"\bbootstrap_room=(?P<room>\d+)"),
    ),
    (re.compile(r"\breq=(?P<rid>[^\s,]+)"), re.compile(r"\bbootstrap_room=(?P<room>\d+)")),
    (
        re.compile(r"\"rid\":\s*\"(?P<rid>[^\"]+)\""),
        re.compile(r"\"bootstrap_room\":\s*(?P<room>\d+)"),
    ),
)


@dataclass(frozen=True)
class Evidence:
    node: str
    ts: datetime | None
    kind: str
    request_id: str | None
    value: int | None
    max_value: int | None
    message: str
    src_file: str
    src_line: int
    bootstrap_room: int | None
    slot_idx: int | None
    position: int | None
    primary: bool


def build(
    match: Match, node: str, ts: datetime | None, body: str, src: tuple[str, int], primary: bool
) -> Evidence:
    """An engine_evidence row from a matched evidence line."""
    v = match.values
    return Evidence(
        node=node,
        ts=ts,
        kind=match.spec.kind.removeprefix("evidence."),
        request_id=v.get("request_id"),
        value=_int(v, "value"),
        max_value=_int(v, "max_value"),
        message=body.strip()[:MESSAGE_LIMIT],
        src_file=src[0],
        src_line=src[1],
        bootstrap_room=_int(v, "bootstrap_room"),
        slot_idx=_int(v, "slot_idx"),
        position=_int(v, "position"),
        primary=primary,
    )


def _int(values: dict[str, str], key: str) -> int | None:
    return to_int(values[key]) if key in values else None


def room_pairs(body: str) -> tuple[str, int] | None:
    """(request id, bootstrap room) when a line names exactly one of each."""
    for rid_rx, room_rx in _ROOM_PAIRS:
        rids = {m.group("rid") for m in rid_rx.finditer(body)}
        rooms = {int(m.group("room")) for m in room_rx.finditer(body)}
        if len(rids) == 1 and len(rooms) == 1:
            return rids.pop(), rooms.pop()
    return None


def _key(ev: Evidence) -> tuple[object, ...]:
    return (ev.node, ev.kind, ev.request_id, ev.bootstrap_room, ev.slot_idx, ev.position, ev.ts)


def _rank(ev: Evidence) -> tuple[int, int, str, int]:
    return (ev.value is None, not ev.primary, ev.src_file, ev.src_line)


def dedupe(rows: list[Evidence]) -> tuple[list[Evidence], int]:
    """One row per event when several ranks logged it: the same node, kind, request, room, slot,
    position, time and values, where a line without values (a peer rank's short form, a cut
    line) joins a line with them. Keeps rank 0, then the first line. Returns the rows in
    (file, line) order and how many duplicates were dropped."""
    best: dict[tuple[object, ...], Evidence] = {}
    for ev in sorted(rows, key=_rank):
        key = (*_key(ev), ev.value, ev.max_value)
        if key not in best:
            best[key] = ev
    with_values = {_key(ev) for ev in best.values() if ev.value is not None}
    kept = [ev for ev in best.values() if ev.value is not None or _key(ev) not in with_values]
    kept.sort(key=lambda e: (e.src_file, e.src_line, e.kind))
    return kept, len(rows) - len(kept)


def fill_rooms(rows: list[Evidence], rooms: dict[tuple[str, int], str]) -> list[Evidence]:
    """Give rows that only name a bootstrap room the request id paired with it on that node."""
    out = []
    for ev in rows:
        rid = rooms.get((ev.node, ev.bootstrap_room)) if ev.bootstrap_room is not None else None
        out.append(replace(ev, request_id=rid) if ev.request_id is None and rid else ev)
    return out
