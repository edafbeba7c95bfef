"""The KV ledger as column arrays: events are emitted in engine order with their timestamps,
and flushed in final order once no later event can come before them.

An event emitted while the engine is at time t never has a timestamp before t, so every buffered
event older than the engine clock is final. `flush(before)` takes those out, orders them per node
by (ts, op rank, emission order) — the order DESIGN §3 prescribes without `seq` — and numbers
them with `seq` per node, so the ledger reads the same with or without its seq column."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

FREE, ALLOC, SHARE, WRITE, READ = 0, 1, 2, 3, 4  # equal to the op rank
OPS = ("free", "alloc", "share", "write", "read")
SOURCES = ("", "prefill", "decode", "transfer")
SRC_NONE, SRC_PREFILL, SRC_DECODE, SRC_TRANSFER = 0, 1, 2, 3
FIELDS = (
    ("ts", np.int64), ("node", np.int16), ("rid", np.int32), ("op", np.int8),
    ("start", np.int64), ("count", np.int64), ("pos", np.int64), ("src", np.int8),
    ("hash", np.int32), ("emit", np.int64),
)


@dataclass
class Chunk:
    """Final events, sorted by (node, seq); `seq` numbers them per node from 1."""

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
    """A growable set of column arrays with scalar and vector appends."""

    def __init__(self, n_nodes: int, capacity: int = 1 << 16):
        self.cols = {name: np.empty(capacity, dtype) for name, dtype in FIELDS}
        self.n = 0
        self.emitted = 0
        self.seq = np.zeros(n_nodes, dtype=np.int64)

    def _reserve(self, extra: int) -> None:
        need = self.n + extra
        cap = len(self.cols["ts"])
        if need <= cap:
            return
        new_cap = max(need, cap * 2)
        for name, dtype in FIELDS:
            grown = np.empty(new_cap, dtype)
            grown[:self.n] = self.cols[name][:self.n]
            self.cols[name] = grown

    def emit(self, ts: int, node: int, rid: int, op: int, start: int, count: int,
             pos: int = -1, src: int = 0, hash_id: int = -1) -> None:
        """Append one event (pos -1: none; hash_id -1: none)."""
        self._reserve(1)
        i = self.n
        c = self.cols
        c["ts"][i], c["node"][i], c["rid"][i], c["op"][i] = ts, node, rid, op
        c["start"][i], c["count"][i], c["pos"][i] = start, count, pos
        c["src"][i], c["hash"][i], c["emit"][i] = src, hash_id, self.emitted
        self.n += 1
        self.emitted += 1

    def emit_many(self, ts: np.ndarray, node: int, rid: int, op: int, start: np.ndarray,
                  count: np.ndarray, pos: np.ndarray | int = -1, src: int = 0,
                  hash_id: int = -1) -> None:
        """Append len(start) events of one request and op (ts may be one value or an array)."""
        k = len(start)
        if k == 0:
            return
        self._reserve(k)
        s = slice(self.n, self.n + k)
        c = self.cols
        c["ts"][s], c["node"][s], c["rid"][s], c["op"][s] = ts, node, rid, op
        c["start"][s], c["count"][s], c["pos"][s] = start, count, pos
        c["src"][s], c["hash"][s] = src, hash_id
        c["emit"][s] = np.arange(self.emitted, self.emitted + k)
        self.n += k
        self.emitted += k

    def flush(self, before: int | None = None) -> Chunk:
        """Take out every event with ts < before (all when None), in final order, with seq."""
        live = {k: v[:self.n] for k, v in self.cols.items()}
        take = np.ones(self.n, bool) if before is None else live["ts"] < before
        out = {k: v[take] for k, v in live.items()}
        order = np.lexsort((out["emit"], out["op"], out["ts"], out["node"]))
        out = {k: v[order] for k, v in out.items()}
        keep = ~take
        kept = int(keep.sum())
        for k, v in live.items():
            v[:kept] = v[keep]
        self.n = kept
        out["seq"] = self._number(out["node"])
        return Chunk(out)

    def _number(self, node: np.ndarray) -> np.ndarray:
        seq = np.empty(len(node), np.int64)
        if len(node) == 0:
            return seq
        cuts = np.flatnonzero(np.diff(node)) + 1
        for s, e in zip(np.concatenate(([0], cuts)), np.concatenate((cuts, [len(node)])),
                        strict=True):
            n = int(node[s])
            seq[s:e] = np.arange(self.seq[n] + 1, self.seq[n] + 1 + (e - s))
            self.seq[n] += e - s
        return seq
