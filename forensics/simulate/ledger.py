"""The KV ledger as column arrays: events are emitted in engine order with their timestamps,
and flushed in final order once no later event can come before them.

An event emitted while the engine is at time t never has a timestamp before t, so every buffered
event older than the engine clock is final. `flush(before)` takes those out, orders them per node
by (ts, op rank, emission order) — the order DESIGN.md §3 prescribes without `seq` — and numbers
them with `seq` per node, so the ledger reads the same with or without its seq column.

The buffer is one int64 matrix (a row per field) so the compiled emitters (kernels.py) take a
single array."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from forensics.simulate import kernels as K

FREE, ALLOC, SHARE, WRITE, READ = 0, 1, 2, 3, 4  # equal to the op rank
OPS = ("free", "alloc", "share", "write", "read")
SOURCES = ("", "prefill", "decode", "transfer")
SRC_NONE, SRC_PREFILL, SRC_DECODE, SRC_TRANSFER = 0, 1, 2, 3
FIELDS = ("ts", "node", "rid", "op", "start", "count", "pos", "src", "hash", "emit")
ROW = {name: k for k, name in enumerate(FIELDS)}


@dataclass
class Chunk:
    """Final events, sorted by (node, seq); `seq` numbers them per node from 1. Columns are
    int64 arrays named as in FIELDS, plus seq."""

    cols: dict[str, np.ndarray]

    def __len__(self) -> int:
        return len(self.cols["ts"])

    def node_slices(self) -> list[tuple[int, slice]]:
        node = self.cols["node"]
        if len(node) == 0:
            return []
        cuts = np.flatnonzero(np.diff(node)) + 1
        starts = np.concatenate(([0], cuts))
        ends = np.concatenate((cuts, [len(node)]))
        return [(int(node[s]), slice(int(s), int(e))) for s, e in zip(starts, ends, strict=True)]


class EventBuffer:
    """A growable int64 matrix of events with compiled appends."""

    def __init__(self, n_nodes: int, capacity: int = 1 << 16):
        self.data = np.empty((len(FIELDS), capacity), np.int64)
        self.cap = capacity
        self.n = 0
        self.emitted = 0
        self.seq = np.zeros(n_nodes, dtype=np.int64)

    def _reserve(self, extra: int) -> None:
        need = self.n + extra
        cap = self.data.shape[1]
        if need > cap:
            grown = np.empty((len(FIELDS), max(need, cap * 2)), np.int64)
            grown[:, : self.n] = self.data[:, : self.n]
            self.data = grown
            self.cap = grown.shape[1]

    def emit(
        self,
        ts: int,
        node: int,
        rid: int,
        op: int,
        start: int,
        count: int,
        pos: int = -1,
        src: int = 0,
        hash_id: int = -1,
    ) -> None:
        """Append one event (pos -1: none; hash_id -1: none)."""
        self._reserve(1)
        self.data[:, self.n] = (ts, node, rid, op, start, count, pos, src, hash_id, self.emitted)
        self.n += 1
        self.emitted += 1

    def runs(
        self,
        pages: np.ndarray,
        p0: int,
        p1: int,
        page_size: int,
        ts: int,
        node: int,
        rid: int,
        op: int,
        src: int = 0,
        hash_id: int = -1,
    ) -> None:
        """One event per contiguous slot run holding positions [p0, p1) laid out on pages."""
        if p1 <= p0:
            return
        if self.n + (p1 - p0) // page_size + 2 > self.cap:
            self._reserve((p1 - p0) // page_size + 2)
        row = (ts, node, rid, op, 0, 0, 0, src, hash_id, self.emitted - self.n)
        n = K.emit_runs(self.data, self.n, np.array(row), pages, page_size, p0, p1)
        self.emitted += n - self.n
        self.n = n

    def steps(
        self,
        pages: np.ndarray,
        first_new: int,
        prompt: int,
        end: int,
        t: int,
        tpot: int,
        page_size: int,
        node: int,
        rid: int,
    ) -> None:
        """Decode steps for positions [prompt, end) (see kernels.emit_steps)."""
        self._reserve(len(pages) - first_new + 2 * max(0, end - prompt))
        row = (t, node, rid, ALLOC, 0, 0, 0, SRC_NONE, -1, self.emitted - self.n)
        n = K.emit_steps(
            self.data, self.n, np.array(row), pages, page_size, first_new, prompt, end, tpot
        )
        self.emitted += n - self.n
        self.n = n

    def flush(self, before: int | None = None) -> Chunk:
        """Take out every event with ts < before (all when None), in final order, with seq."""
        live = self.data[:, : self.n]
        key = self._sort_key(live)
        if before is None:
            order = np.argsort(key, kind="stable")
            keep = np.empty(0, np.int64)
        else:
            mask = live[ROW["ts"]] < before
            take, keep = np.flatnonzero(mask), np.flatnonzero(~mask)
            order = take[np.argsort(key[take], kind="stable")]
        out = live[:, order]
        self.data[:, : len(keep)] = live[:, keep]
        self.n = len(keep)
        cols = {name: out[k] for k, name in enumerate(FIELDS)}
        cols["seq"] = self._number(cols["node"])
        return Chunk(cols)

    @staticmethod
    def _sort_key(out: np.ndarray) -> np.ndarray:
        """(node, ts, op) packed into one int64; rows are already in emission order, so a
        stable sort on it orders by (node, ts, op rank, emission)."""
        ts = out[ROW["ts"]]
        if len(ts) == 0:
            return ts
        rel = ts - ts.min()
        if rel.max() >= 1 << 52:  # a window too long to pack: sort by the full tuple instead
            order = np.lexsort((out[ROW["emit"]], out[ROW["op"]], ts, out[ROW["node"]]))
            return np.argsort(order)
        return (out[ROW["node"]] << 55) | (rel << 3) | out[ROW["op"]]

    def _number(self, node: np.ndarray) -> np.ndarray:
        seq = np.empty(len(node), np.int64)
        if len(node) == 0:
            return seq
        cuts = np.flatnonzero(np.diff(node)) + 1
        for s, e in zip(
            np.concatenate(([0], cuts)), np.concatenate((cuts, [len(node)])), strict=True
        ):
            n = int(node[s])
            seq[s:e] = np.arange(self.seq[n] + 1, self.seq[n] + 1 + (e - s))
            self.seq[n] += e - s
        return seq
