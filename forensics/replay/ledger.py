"""What a suspect's decode read, rebuilt from the ledger and the kept contents.

For a suspect R: its decode node (the request log's decode_node or node, else the node of its
last read); its first read there (every read event of R at the earliest read time: one decode
step may log several ranges); and for each slot of those reads, the last writer before the read
and that writer's position (a per-request walk over the writes, in ledger order). R's position p
is the slot's pos_start + offset; positions run up to R's billed prompt length.

A `transfer` write carries KV from the writer's prefill node: where the writer held a position
there through a prefix-cache `share` of another request's different content, that KV is what
was transferred, so the slot is traced back to it.

The writers' tokens come from `contents`: what each request processed (processed_token_ids when
the engine computed something else, else the prompt), up to its billed prompt length (positions a
stub never computed hold 0 and are never needed), then what it generated."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import duckdb
import numpy as np

from forensics.errors import ReplayError
from forensics.sql import sql

Slot = tuple[str, int] | None


@dataclass(frozen=True)
class Contents:
    prompt: list[int] | None
    output: list[int] | None
    processed: list[int] | None
    billed: int | None = None

    @property
    def computed(self) -> list[int] | None:
        """Token at each position whose KV the request wrote: processed tokens (padded with 0 to
        the billed prompt length), then the generated tokens."""
        first = self.processed if self.processed is not None else self.prompt
        if first is None:
            return None
        pad = max(0, (self.billed or 0) - len(first))
        return first + [0] * pad + (self.output or [])


@dataclass
class SuspectPlan:
    """Everything a replay of one suspect needs."""

    request_id: str
    decode_node: str
    prompt: list[int]
    processed: list[int]
    n_out: int
    delivered: list[int] | None
    delivered_sha256: str | None
    slots: list[Slot]
    writers: dict[str, list[int]] = field(default_factory=dict)

    @property
    def foreign(self) -> dict[str, int]:
        """Foreign writer -> number of the suspect's positions holding its KV."""
        counts: dict[str, int] = {}
        for slot in self.slots:
            if slot is not None and slot[0] != self.request_id:
                counts[slot[0]] = counts.get(slot[0], 0) + 1
        return dict(sorted(counts.items()))

    @property
    def uninitialised(self) -> int:
        return sum(1 for slot in self.slots if slot is None)


def plan_suspect(con: duckdb.DuckDBPyConnection, request_id: str) -> SuspectPlan:
    """Rebuild what the suspect's first decode read; ReplayError says why it cannot be done."""
    request = _request(con, request_id)
    own = load_contents(con, [request_id]).get(request_id)
    if own is None:
        raise ReplayError("no contents for the request (its prompt and output were not kept)")
    if own.prompt is None:
        raise ReplayError("the request's contents have no prompt_token_ids")
    n_out = _output_length(request, own)
    node = request["decode_node"] or _last_read_node(con, request_id)
    if node is None:
        raise ReplayError("the ledger has no read by the request on any node")
    positions = int(request["prompt_tokens"] or len(own.prompt))
    slots = _resolve_transfers(con, node, first_read(con, node, request_id, positions))
    writers = _writer_tokens(con, request_id, own, slots)
    return SuspectPlan(
        request_id,
        node,
        own.prompt,
        own.processed or own.prompt,
        n_out,
        own.output,
        request["response_sha256"],
        slots,
        writers,
    )


def _request(con: duckdb.DuckDBPyConnection, request_id: str) -> dict[str, Any]:
    cur = con.execute(sql("replay/request"), {"request_id": request_id})
    row = cur.fetchone()
    if row is None:
        raise ReplayError("the request is not in the request log")
    return dict(zip([d[0] for d in cur.description], row, strict=True))


def _output_length(request: dict[str, Any], own: Contents) -> int:
    if request["completion_tokens"] is not None:
        return int(request["completion_tokens"])
    if own.output is not None:
        return len(own.output)
    raise ReplayError("the output length is unknown (no completion_tokens, no output_token_ids)")


def _last_read_node(con: duckdb.DuckDBPyConnection, request_id: str) -> str | None:
    row = con.execute(sql("replay/last_read_node"), {"request_id": request_id}).fetchone()
    return None if row is None else str(row[0])


def load_contents(
    con: duckdb.DuckDBPyConnection, request_ids: Sequence[str]
) -> dict[str, Contents]:
    rows = con.execute(sql("replay/contents"), {"request_ids": list(request_ids)}).fetchall()
    return {rid: Contents(_ints(p), _ints(o), _ints(c), b) for rid, p, o, c, b in rows}


def _ints(values: Sequence[int] | None) -> list[int] | None:
    return None if values is None else [int(v) for v in values]


# (writer, writer position, written by a transfer, held by the reader through a share) per
# reader position, or None
Source = tuple[str, int, bool, bool] | None


def first_read_slots(
    con: duckdb.DuckDBPyConnection, node: str, request_id: str, positions: int
) -> list[Slot]:
    """slots[p] for p < positions: (last writer, its position) of the slot R's first read on
    `node` held at position p, or None (never written, or not read); transfers not traced."""
    return [
        None if s is None else (s[0], s[1]) for s in first_read(con, node, request_id, positions)
    ]


def first_read(
    con: duckdb.DuckDBPyConnection, node: str, request_id: str, positions: int
) -> list[Source]:
    events = con.execute(
        sql("replay/node_events"), {"node": node, "request_id": request_id}
    ).fetchall()
    reads = [e for e in events if e[1] == "read"]
    if not reads:
        raise ReplayError(f"the ledger has no read by the request on node {node}")
    first_ts = reads[0][6]
    group = {e[0] for e in reads if e[6] == first_ts}
    return _walk(events, group, positions)


def _walk(events: list[tuple[Any, ...]], group: set[int], positions: int) -> list[Source]:
    """Apply writes (and the reader's shares) in order; at each read of the group, note each
    slot's last writer."""
    read_ranges = [(e[3], e[3] + e[4]) for e in events if e[0] in group]
    slots = np.unique(np.concatenate([np.arange(lo, hi) for lo, hi in read_ranges]))
    state = _SlotState(len(slots))
    result: list[Source] = [None] * positions
    last = max(group)
    for ord_, op, req, start, count, pos_start, _, source in events:
        if ord_ > last:
            break
        lo, hi = np.searchsorted(slots, [start, start + count])
        if hi <= lo:
            continue
        if op == "write":
            state.write(
                lo, hi, (str(req), source == "transfer"), pos_start + (slots[lo:hi] - start)
            )
        elif op == "share":
            state.shared[lo:hi] = True
        elif ord_ in group:
            state.snapshot(result, lo, hi, pos_start - start + slots[lo:hi])
    return result


class _SlotState:
    """Per read slot: last writer (index into names), its position, and whether the reader
    holds the slot through a share."""

    def __init__(self, n: int):
        self.writer = np.full(n, -1, dtype=np.int64)
        self.wpos = np.zeros(n, dtype=np.int64)
        self.shared = np.zeros(n, dtype=bool)
        self.names: list[tuple[str, bool]] = []

    def write(self, lo: int, hi: int, name: tuple[str, bool], positions: np.ndarray) -> None:
        self.names.append(name)
        self.writer[lo:hi] = len(self.names) - 1
        self.wpos[lo:hi] = positions

    def snapshot(self, result: list[Source], lo: int, hi: int, positions: np.ndarray) -> None:
        for p, w, q, shared in zip(
            positions.tolist(),
            self.writer[lo:hi].tolist(),
            self.wpos[lo:hi].tolist(),
            self.shared[lo:hi].tolist(),
            strict=True,
        ):
            if 0 <= p < len(result):
                if w < 0:
                    result[p] = None
                else:
                    name, transfer = self.names[w]
                    result[p] = (name, q, transfer, shared)


def _resolve_transfers(
    con: duckdb.DuckDBPyConnection, node: str, sources: list[Source]
) -> list[Slot]:
    """Trace transfer-written slots back to the KV the writer's prefill read held through a
    prefix-cache share, where that KV differs from the writer's own (a verified hit holds the
    same KV: not traced). Anything else a transfer carries is the writer's own KV."""
    views: dict[str, list[Source] | None] = {}
    same = _SamePrefix(con)
    out: list[Slot] = []
    for source in sources:
        if source is None:
            out.append(None)
            continue
        writer, pos, transfer, _ = source
        if transfer and writer not in views:
            views[writer] = _prefill_view(con, node, writer)
        view = views.get(writer) if transfer else None
        held = view[pos] if view is not None and pos < len(view) else None
        if held is not None and held[3] and not same(writer, pos, held[0], held[1]):
            out.append((held[0], held[1]))  # a prefix-cache hit on someone else's content
        else:
            out.append((writer, pos))
    return out


class _SamePrefix:
    """Whether two (request, position) pairs hold the same KV: same position, same tokens up to
    it (the model is deterministic). Contents are loaded once per request."""

    def __init__(self, con: duckdb.DuckDBPyConnection):
        self.con = con
        self.tokens: dict[str, list[int] | None] = {}
        self.common: dict[tuple[str, str], int] = {}

    def __call__(self, a: str, p: int, b: str, q: int) -> bool:
        if a == b or p != q:
            return a == b and p == q
        key = (min(a, b), max(a, b))
        if key not in self.common:
            self.common[key] = _common_prefix(self._tokens(a), self._tokens(b))
        return p < self.common[key]

    def _tokens(self, rid: str) -> list[int]:
        if rid not in self.tokens:
            found = load_contents(self.con, [rid]).get(rid)
            self.tokens[rid] = None if found is None else found.computed
        return self.tokens[rid] or []


def _common_prefix(a: list[int], b: list[int]) -> int:
    n = min(len(a), len(b))
    diff = np.flatnonzero(np.asarray(a[:n]) != np.asarray(b[:n]))
    return int(diff[0]) if len(diff) else n


def _prefill_view(
    con: duckdb.DuckDBPyConnection, decode_node: str, writer: str
) -> list[Source] | None:
    """The writer's first read on its prefill node (None when that node or read is unknown)."""
    try:
        request = _request(con, writer)
        prefill = request["prefill_node"]
        if prefill is None or prefill == decode_node or request["prompt_tokens"] is None:
            return None
        return first_read(con, prefill, writer, int(request["prompt_tokens"]))
    except ReplayError:
        return None


def _writer_tokens(
    con: duckdb.DuckDBPyConnection, request_id: str, own: Contents, slots: list[Slot]
) -> dict[str, list[int]]:
    """Tokens of every writer of the slots; ReplayError names the writers without contents."""
    needed = sorted({s[0] for s in slots if s is not None} - {request_id})
    found = load_contents(con, needed)
    missing = [w for w in needed if w not in found or found[w].computed is None]
    if missing:
        shown = ", ".join(missing[:5]) + (" …" if len(missing) > 5 else "")
        raise ReplayError(f"no contents for {len(missing)} writer(s) of the slots it read: {shown}")
    writers = {w: found[w].computed or [] for w in needed}
    writers[request_id] = own.computed or []
    return writers
