"""Fetch one node's events from DuckDB into compact arrays, in the node's total order.

DuckDB gives a node's events (queries/analysis/sweep_input.sql) in batches, in the order its
threads produced them, not in the total order ((rank, key): see the query). How they are put in
order depends on the node's keys (kv_events.input_order):

- Dense keys (the node's events are every row of its ledger files, the usual case: one or more
  files per engine node; input_order is the file's rank * 2^40 + its row): an event's place in
  key order follows from its key and the node's keys per file (NodeInfo.segments). One compiled
  pass per batch copies each event straight to that place, without keeping the rank, and checks
  that key order is the total order: within each stretch of consecutive places a batch brings,
  the rank never falls, and across stretches the rank at each seam does not fall either.
  Nothing is sorted and no key is held (event i's key is the one at place i).
- Dense keys out of rank order (a ledger whose seq or time stamps disagree with its row order):
  the node is fetched again, sorted by DuckDB within its own memory limit, and copied as it
  comes (the same pass checks that it came in order), each key held by its place (int32).
- Other keys (a file holding several nodes' events): the rank is kept beside the columns and
  numpy sorts (total_order); this holds more per event (forensics.analysis.budget).

What is held per event: the request code (int32), op (int8), content-hash code (int32), the slot
range (int32 each where the node's slots fit, else int64) and, where the keys are not placed by
key, the key's place (for keys that are not dense, its offset from the node's smallest key:
int32 where the node's keys span less than 2**31, else int64).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

import duckdb
import numpy as np
import pyarrow as pa
from numba import njit

import forensics.base.jitcache  # noqa: F401  (a stale compiled-code cache is recompiled)
from forensics.analysis.codes import OPS
from forensics.base.arrow import as_numpy
from forensics.casedb.interrupts import stop_if_interrupted
from forensics.casedb.sql import nested, run_script, sql, template

FETCH_ROWS = 1 << 20  # rows per batch when fetching a node's events
_INT32_MAX = int(np.iinfo(np.int32).max)


@dataclass(frozen=True)
class NodeInfo:
    node: str
    events: int
    by_seq: bool
    slot_end_max: int = 0  # the node's highest slot end
    key_min: int = 0  # the node's smallest and largest event key
    key_max: int = 0
    reads: int = 0  # its read events, and its alloc and share events
    acquisitions: int = 0
    # [smallest, largest] key of the node in each ledger file, in key order
    files: tuple[tuple[int, int], ...] = ()

    @property
    def slot_dtype(self) -> type[np.signedinteger]:
        """int32 when every slot of the node fits (slots are >= 0), else int64."""
        return np.int32 if self.slot_end_max <= _INT32_MAX else np.int64

    @property
    def dense_keys(self) -> bool:
        """Whether the node's keys are every row of its files (in each file, every key from the
        node's smallest to its largest is one of its events)."""
        return bool(self.files) and sum(b - a + 1 for a, b in self.files) == self.events

    @property
    def segments(self) -> np.ndarray:
        """[first key, last key, first place] of each stretch of keys, the place being the
        key's index in key order: one per file with dense keys, else one from the node's
        smallest key to its largest (the place is then the key less the smallest)."""
        spans = self.files if self.dense_keys else ((self.key_min, self.key_max),)
        out = np.zeros((max(1, len(spans)), 3), np.int64)
        for i, (a, b) in enumerate(spans):
            out[i] = a, b, out[i - 1, 2] + out[i - 1, 1] - out[i - 1, 0] + 1 if i else 0
        return out

    @property
    def key_dtype(self) -> type[np.signedinteger]:
        """What the node's keys are held as, by place: int32 where every place fits."""
        last = self.events if self.dense_keys else self.key_max - self.key_min
        return np.int32 if last <= _INT32_MAX else np.int64


@dataclass
class NodeEvents:
    """One node's events in their total order. The sweep drops the slot ranges and content
    hashes as soon as it is done with them (forensics.analysis.order.find_on_node)."""

    node: str
    # The place of the event's key (kv_events.input_order) among `segments` (NodeInfo.segments,
    # NodeInfo.key_dtype); None when event i's key is at place i.
    key: np.ndarray | None
    req: np.ndarray  # int32 request codes
    op: np.ndarray  # int8 op codes (forensics.analysis.codes.OPS)
    content_hash: np.ndarray  # int32 hash codes, -1 when absent; emptied once swept
    # [slot_start, slot_end]: int32 where the node's slots fit (NodeInfo.slot_dtype), else
    # int64; emptied when made into cells.
    slots: list[np.ndarray]
    segments: np.ndarray = field(default_factory=lambda: np.zeros((1, 3), np.int64))
    # how it was fetched, in turn: "by key", "sorted" (by DuckDB) or "ranked" (sorted here)
    fetches: list[str] = field(default_factory=list)

    def keys(self, index: np.ndarray) -> np.ndarray:
        """The int64 keys (kv_events.input_order) of the events at positions `index`."""
        place = np.asarray(index, np.int64)
        if self.key is not None:
            place = self.key[place].astype(np.int64)
        seg = self.segments
        s = np.searchsorted(seg[:, 2], place, side="right") - 1
        return seg[s, 0] + place - seg[s, 2]


def make_ledger_nodes(con: duckdb.DuckDBPyConnection, per_file: str) -> None:
    """temp.analysis_ledger_nodes from the figures per node and file of query `per_file`."""
    run_script(con, template(sql("analysis/ledger_nodes"), per_file=nested(per_file)))


def node_list(con: duckdb.DuckDBPyConnection, counted: bool = False) -> list[NodeInfo]:
    """The nodes to sweep, from one pass over the ledger that also keeps what screening and
    the summary need of it (temp.analysis_ledger_nodes). counted: that table is made already
    (from what ingest recorded of an external ledger's parts), and no pass is needed."""
    if not counted:
        make_ledger_nodes(con, "analysis/ledger_nodes_pass")
    rows = con.execute(sql("analysis/nodes")).fetchall()
    out = []
    for node, n, by_seq, end, key_min, key_max, reads, acquisitions, files in rows:
        spans = tuple((int(lo), int(hi)) for lo, hi in files)
        counts = (int(end), int(key_min), int(key_max), int(reads), int(acquisitions))
        out.append(NodeInfo(node, int(n), bool(by_seq), *counts, files=spans))
    return out


Batches = Callable[[bool], Iterable[pa.RecordBatch]]  # sorted? -> the node's coded events


def load_node(con: duckdb.DuckDBPyConnection, info: NodeInfo) -> NodeEvents:
    """One node's events in its total order, held once (see the module docstring)."""
    return events_of(info, lambda ordered: fetch_batches(con, info, ordered))


def fetch_batches(
    con: duckdb.DuckDBPyConnection, info: NodeInfo, ordered: bool = False
) -> Iterator[pa.RecordBatch]:
    """One node's coded events (queries/analysis/sweep_input.sql) in batches: as DuckDB
    produces them, or sorted into the total order."""
    params = {"node": info.node, "by_seq": info.by_seq, "ops": list(OPS)}
    text = sql("analysis/sweep_input")
    if ordered:
        text = template(sql("analysis/sweep_input_ordered"), query=nested("analysis/sweep_input"))
    return _stoppable(con.sql(text, params=params).to_arrow_reader(FETCH_ROWS))


def _stoppable(reader: pa.RecordBatchReader) -> Iterator[pa.RecordBatch]:
    """The reader's batches, until Ctrl-C comes (a stream begun before it runs on otherwise)."""
    for batch in reader:
        stop_if_interrupted(workers_only=True)
        yield batch


def events_of(
    info: NodeInfo, batches: Batches, more: Callable[[int], None] | None = None
) -> NodeEvents:
    """The node's events in order (see the module docstring). `batches(ordered)` gives the
    node's coded events, sorted when asked. A node with dense keys out of rank order holds its
    keys after all: `more` is told the bytes first (forensics.analysis.budget counts them)."""
    cols = _new_columns(info, keys=not info.dense_keys)
    if info.dense_keys:
        if _placed_by_key(info, batches(False), cols):
            return _node_events(info, cols, None, ["by key"])
        if more is not None:
            more(info.events * np.dtype(info.key_dtype).itemsize)
        cols["key"] = np.empty(info.events, info.key_dtype)
        _copied_in_order(info, batches(True), cols)
        return _node_events(info, cols, cols.pop("key"), ["by key", "sorted"])
    rank = np.empty(info.events, np.int64)
    _copied_in_order(info, batches(False), cols, rank)
    order = total_order(rank, cols["key"])
    del rank
    for name in list(cols):
        values = cols.pop(name)
        cols[name] = values if order is None else values[order]
    return _node_events(info, cols, cols.pop("key"), ["ranked"])


def _new_columns(info: NodeInfo, keys: bool) -> dict[str, np.ndarray]:
    n = info.events
    cols = {"key": np.empty(n if keys else 0, info.key_dtype)}
    cols |= {"op": np.empty(n, np.int8), "req": np.empty(n, np.int32)}
    cols |= {"slot_start": np.empty(n, info.slot_dtype), "slot_end": np.empty(n, info.slot_dtype)}
    cols["hash"] = np.empty(n, np.int32)
    return cols


def _node_events(
    info: NodeInfo, cols: dict[str, np.ndarray], key: np.ndarray | None, fetches: list[str]
) -> NodeEvents:
    slots = [cols.pop("slot_start"), cols.pop("slot_end")]
    req, op, content_hash = cols.pop("req"), cols.pop("op"), cols.pop("hash")
    return NodeEvents(info.node, key, req, op, content_hash, slots, info.segments, fetches)


_COLUMNS = ("rank", "event_key", "op_code", "req_code", "slot_start", "slot_end", "hash_code")
_VALUES = ("op", "req", "slot_start", "slot_end", "hash")


def _sources(batch: pa.RecordBatch) -> list[np.ndarray]:
    return [as_numpy(batch.column(name)) for name in _COLUMNS]


def _counted(info: NodeInfo, at: int) -> None:
    if at != info.events:
        raise RuntimeError(f"node {info.node}: {at} events fetched, {info.events} counted")


def _placed_by_key(
    info: NodeInfo, batches: Iterable[pa.RecordBatch], cols: dict[str, np.ndarray]
) -> bool:
    """Copy each event to its place in key order; whether that order is the total order.
    The stretches of consecutive keys the batches bring are noted ([first place, its rank,
    last place, its rank]), so the seams between them can be checked at the end."""
    stretches = np.zeros((info.events // 256 + 16, 4), np.int64)
    segments = info.segments
    n = at = 0
    for batch in batches:
        at += batch.num_rows
        if at > info.events:
            raise RuntimeError(f"node {info.node}: more events than counted ({info.events})")
        n = _place_batch(  # type: ignore[call-arg]
            *_sources(batch), segments, *(cols[c] for c in _VALUES), stretches, n
        )
        if n < 0:  # a rank fell within a stretch, or too many stretches to check
            return False
    _counted(info, at)
    return _seamless(stretches[:n], info.events)


def _seamless(stretches: np.ndarray, events: int) -> bool:
    """Whether the stretches cover places 0 .. events - 1 once each with the rank never
    falling at a seam."""
    s = stretches[np.argsort(stretches[:, 0], kind="stable")]
    if len(s) == 0:
        return events == 0
    return bool(
        s[0, 0] == 0
        and s[-1, 2] == events - 1
        and np.all(s[1:, 0] == s[:-1, 2] + 1)
        and np.all(s[1:, 1] >= s[:-1, 3])
    )


@njit(cache=True, nogil=True)
def _place_of(k, segments, s):  # type: ignore[no-untyped-def]
    """(the place of key k, its segment), trying segment s first; place -1 when no segment
    holds k."""
    if not (segments[s, 0] <= k <= segments[s, 1]):
        lo, hi = 0, segments.shape[0]  # the last segment starting at or before k
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if segments[mid, 0] <= k:
                lo = mid
            else:
                hi = mid
        s = lo
        if not (segments[s, 0] <= k <= segments[s, 1]):
            return -1, s
    return segments[s, 2] + k - segments[s, 0], s


@njit(cache=True, nogil=True)
def _place_batch(  # type: ignore[no-untyped-def]
    rank, key, op, req, s0, s1, hsh, segments, o_op, o_req, o_s0, o_s1, o_hsh, stretches, n
):
    """Copy one batch, each event to the place of its key among `segments`, extending
    `stretches` (n so far). Returns the stretches now; -1 when a rank falls inside a stretch
    (key order is not the total order) or `stretches` has no room for another."""
    s = 0
    for i in range(rank.shape[0]):
        r = rank[i]
        at, s = _place_of(key[i], segments, s)
        if at < 0 or at >= o_op.shape[0]:  # not the keys counted: let the caller sort instead
            return -1
        if n and at == stretches[n - 1, 2] + 1:
            if r < stretches[n - 1, 3]:
                return -1
        else:
            if n == stretches.shape[0]:
                return -1
            stretches[n, 0] = at
            stretches[n, 1] = r
            n += 1
        stretches[n - 1, 2] = at
        stretches[n - 1, 3] = r
        o_op[at] = op[i]
        o_req[at] = req[i]
        o_s0[at] = s0[i]
        o_s1[at] = s1[i]
        o_hsh[at] = hsh[i]
    return n


def _copied_in_order(
    info: NodeInfo,
    batches: Iterable[pa.RecordBatch],
    cols: dict[str, np.ndarray],
    rank: np.ndarray | None = None,
) -> None:
    """Copy the batches into the node's arrays as they come: keys (less the node's smallest)
    where cols has room for them, ranks where `rank` is given. Without `rank`, the events must
    come in their total order."""
    keys = len(cols["key"]) > 0
    key_out = cols["key"] if keys else np.empty(1, info.key_dtype)
    last = np.zeros(3, np.int64)  # events so far, the last one's rank and key
    segments = info.segments
    at = 0
    for batch in batches:
        end = at + batch.num_rows
        if end > info.events:
            raise RuntimeError(f"node {info.node}: more events than counted ({info.events})")
        src = _sources(batch)
        if rank is not None:
            rank[at:end] = src[0]
        ok = _copy_batch(  # type: ignore[call-arg]
            at, *src, segments, keys, key_out, *(cols[c] for c in _VALUES), last
        )
        if rank is None and not ok:
            raise RuntimeError(f"node {info.node}: the sorted events came out of order")
        at = end
    _counted(info, at)


@njit(cache=True, nogil=True)
def _copy_batch(  # type: ignore[no-untyped-def]
    at, rank, key, op, req, s0, s1, hsh, segments, keys, o_key, o_op, o_req, o_s0, o_s1, o_hsh, last
):
    """Copy one batch into rows at, at + 1, ... of the node's arrays (the places of the keys
    among `segments`, when `keys`). Returns whether (rank, key) ascended all along, from the
    event before (`last`: [events so far, rank, key], updated)."""
    ascending = True
    s = 0
    for i in range(rank.shape[0]):
        r, k = rank[i], key[i]
        if last[0] and (r < last[1] or (r == last[1] and k <= last[2])):
            ascending = False
        last[0] += 1
        last[1] = r
        last[2] = k
        if keys:
            place, s = _place_of(k, segments, s)
            o_key[at + i] = place
        o_op[at + i] = op[i]
        o_req[at + i] = req[i]
        o_s0[at + i] = s0[i]
        o_s1[at + i] = s1[i]
        o_hsh[at + i] = hsh[i]
    return ascending


def total_order(rank: np.ndarray, key: np.ndarray) -> np.ndarray | None:
    """The permutation that sorts events by (rank, key), keys being unique; None when they
    are in that order already.

    Checking that costs one pass, where a full two-key sort costs many. With the keys
    ascending, a stable sort on the rank alone gives the same permutation as the two-key sort
    (ties keep their key order), and numpy's stable sort is fast on the nearly sorted ranks
    that a ledger written in time order has."""
    keys_ascending = bool(np.all(key[1:] > key[:-1]))
    if keys_ascending and bool(np.all(rank[1:] >= rank[:-1])):
        return None
    if keys_ascending:
        return np.argsort(rank, kind="stable")
    return np.lexsort((key, rank))
