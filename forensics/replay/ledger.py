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

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import duckdb
import numpy as np

from forensics.casedb.sql import one_row, sql
from forensics.errors import ReplayError
from forensics.replay.views import Source, StepViews, walk_steps

Slot = tuple[str, int] | None

WRITER_DEPTH = 3  # levels of writers of writers whose own steps are replayed


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
    # prompt positions the suspect computed itself in its first step on this node (a node that
    # runs prefill and decode); empty when its prefill ran on another node
    computed: list[int] = field(default_factory=list)
    # per later step: (frontier, [(position, slot)]) where the KV it read differs from the
    # previous step's and from what the replay itself computed there
    later: list[tuple[int, list[tuple[int, Slot]]]] = field(default_factory=list)
    # writers whose KV on this node was computed over KV not their own (their plans): their KV
    # is rebuilt by replaying their own steps with the tokens they really fed
    replayed: dict[str, SuspectPlan] = field(default_factory=dict)
    # the request log's sampling temperature (requests.temperature), when it has one
    temperature: float | None = None

    @property
    def foreign(self) -> dict[str, int]:
        """Foreign writer -> number of the suspect's positions holding its KV (at any step)."""
        seen: dict[str, set[int]] = {}
        changed = ((p, s) for _, changes in self.later for p, s in changes)
        for p, slot in itertools.chain(enumerate(self.slots), changed):
            if slot is not None and slot[0] != self.request_id:
                seen.setdefault(slot[0], set()).add(p)
        return {w: len(ps) for w, ps in sorted(seen.items())}

    @property
    def stepwise(self) -> bool:
        """Whether replay must follow the steps: the first step computed prompt positions over
        the KV it read, a later step read KV that changed, or a writer is replayed."""
        return bool(self.computed or self.later or self.replayed)

    @property
    def read_other_kv(self) -> bool:
        """Whether the KV this request computed on its node came from attending KV that was not
        its own: a first step over another writer's or never-written KV, or a later change."""
        context = self.slots[: self.computed[0]] if self.computed else []
        return bool(self.later) or any(s is None or s[0] != self.request_id for s in context)

    def rebuilds(self) -> list[dict[str, int]]:
        """Per rebuild of writers' KV (the first read's, then each later step's changes): writer
        -> how many of its positions are needed."""
        first = self.slots[: self.computed[0]] if self.computed else self.slots
        return [_needs(first), *(_needs(s for _, s in changes) for _, changes in self.later)]

    def computed_tokens(self) -> list[int]:
        """The tokens the first step fed at the `computed` positions: what the engine processed
        (for a stub, the prompt tokens after the positions it took as already computed)."""
        if len(self.processed) == len(self.computed):
            return list(self.processed)
        return [self.prompt[p] for p in self.computed]

    @property
    def uninitialised(self) -> int:
        return sum(1 for slot in self.slots if slot is None)


def _needs(slots: Iterable[Slot]) -> dict[str, int]:
    needed: dict[str, int] = {}
    for slot in slots:
        if slot is not None:
            needed[slot[0]] = max(needed.get(slot[0], 0), slot[1] + 1)
    return needed


def plan_suspect(
    con: duckdb.DuckDBPyConnection, request_id: str, depth: int = WRITER_DEPTH
) -> SuspectPlan:
    """Rebuild what each step of the suspect read; ReplayError says why it cannot be done.
    Writers whose own KV was computed over other KV are planned too, `depth` levels deep."""
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
    views = walk_steps(_node_events(con, node, request_id), positions)
    resolve = _Resolver(con, node)
    slots = [resolve(s) for s in views.first]
    computed = _computed_here(views, request_id, node)
    later = _later_changes(views, request_id, set(computed), positions, resolve)
    needed = slots + [s for _, changes in later for _, s in changes]
    writers = _writer_tokens(con, request_id, own, needed)
    replayed = _replayed_writers(con, node, set(writers) - {request_id}, depth)
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
        computed,
        later,
        replayed,
        request_temperature(con, request_id),
    )


def _replayed_writers(
    con: duckdb.DuckDBPyConnection, node: str, writers: set[str], depth: int
) -> dict[str, SuspectPlan]:
    """Plans of the writers that ran their prefill on `node` and computed their KV there over
    KV not their own (and whose output tokens were kept): rebuilding them clean would give other
    KV than the slots held."""
    found: dict[str, SuspectPlan] = {}
    if depth <= 0 or not writers:
        return found
    params = {"node": node, "request_ids": sorted(writers)}
    here = [str(r) for (r,) in con.execute(sql("replay/prefill_writers"), params).fetchall()]
    for writer in here:
        try:
            plan = plan_suspect(con, writer, depth - 1)
        except ReplayError:
            continue
        if plan.decode_node == node and plan.delivered is not None and plan.read_other_kv:
            found[writer] = plan
    return found


def _own_here(source: Source, request_id: str, position: int) -> bool:
    """The suspect's own KV at `position`, computed on this node (not transferred)."""
    return (
        source is not None and source[0] == request_id and not source[2] and source[1] == position
    )


def _computed_here(views: StepViews, request_id: str, node: str) -> list[int]:
    """Prompt positions the first step computed: the last positions it read, one run."""
    computed = [p for p, s in enumerate(views.first) if _own_here(s, request_id, p)]
    if computed and computed != list(range(computed[0], len(views.first))):
        raise ReplayError(
            f"its first step on node {node} computed prompt positions {computed[0]}.."
            f"{computed[-1]} of {len(views.first)}, not the run up to the end of its prompt "
            "(a prefill split over several steps): replay rebuilds a prefill done in one step"
        )
    return computed


def _later_changes(
    views: StepViews,
    request_id: str,
    computed: set[int],
    positions: int,
    resolve: _Resolver,
) -> list[tuple[int, list[tuple[int, Slot]]]]:
    """Later steps' changes, without the positions holding the KV the replay computes itself
    (its own prefill positions and every generated token's)."""
    later = []
    for frontier, changes in views.later:
        kept = [
            (p, resolve(s))
            for p, s in changes
            if not (_own_here(s, request_id, p) and (p in computed or p >= positions))
        ]
        if kept:
            later.append((frontier, kept))
    return later


def _node_events(con: duckdb.DuckDBPyConnection, node: str, request_id: str) -> list[Any]:
    events = con.execute(
        sql("replay/node_events"), {"node": node, "request_id": request_id}
    ).fetchall()
    if not any(e[1] == "read" for e in events):
        raise ReplayError(f"the ledger has no read by the request on node {node}")
    return events


def _request(con: duckdb.DuckDBPyConnection, request_id: str) -> dict[str, Any]:
    cur = con.execute(sql("replay/request"), {"request_id": request_id})
    row = one_row(cur)
    if row is None:
        raise ReplayError("the request is not in the request log")
    return dict(zip([d[0] for d in cur.description], row, strict=True))


def request_temperature(con: duckdb.DuckDBPyConnection, request_id: str) -> float | None:
    """The request's sampling temperature, where the request log has the optional column."""
    try:
        row = one_row(con.execute(sql("replay/request_sampling"), {"request_id": request_id}))
    except duckdb.BinderException:  # a case database made before requests could carry it
        return None
    return None if row is None or row[0] is None else float(row[0])


def _output_length(request: dict[str, Any], own: Contents) -> int:
    if request["completion_tokens"] is not None:
        return int(request["completion_tokens"])
    if own.output is not None:
        return len(own.output)
    raise ReplayError("the output length is unknown (no completion_tokens, no output_token_ids)")


def _last_read_node(con: duckdb.DuckDBPyConnection, request_id: str) -> str | None:
    row = one_row(con.execute(sql("replay/last_read_node"), {"request_id": request_id}))
    return None if row is None else str(row[0])


def load_contents(
    con: duckdb.DuckDBPyConnection, request_ids: Sequence[str]
) -> dict[str, Contents]:
    rows = con.execute(sql("replay/contents"), {"request_ids": list(request_ids)}).fetchall()
    return {rid: Contents(_ints(p), _ints(o), _ints(c), b) for rid, p, o, c, b in rows}


def _ints(values: Sequence[int] | None) -> list[int] | None:
    return None if values is None else [int(v) for v in values]


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
    return walk_steps(_node_events(con, node, request_id), positions, all_steps=False).first


class _Resolver:
    """Trace transfer-written slots back to the KV the writer's prefill read held through a
    prefix-cache share, where that KV differs from the writer's own (a verified hit holds the
    same KV: not traced). Anything else a transfer carries is the writer's own KV."""

    def __init__(self, con: duckdb.DuckDBPyConnection, node: str):
        self.con = con
        self.node = node
        self.views: dict[str, list[Source] | None] = {}
        self.same = _SamePrefix(con)

    def __call__(self, source: Source) -> Slot:
        if source is None:
            return None
        writer, pos, transfer, _ = source
        if not transfer:
            return (writer, pos)
        if writer not in self.views:
            self.views[writer] = _prefill_view(self.con, self.node, writer)
        view = self.views[writer]
        held = view[pos] if view is not None and pos < len(view) else None
        if held is not None and held[3] and not self.same(writer, pos, held[0], held[1]):
            return (held[0], held[1])  # a prefix-cache hit on someone else's content
        return (writer, pos)


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
    con: duckdb.DuckDBPyConnection, request_id: str, own: Contents, slots: Sequence[Slot]
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
