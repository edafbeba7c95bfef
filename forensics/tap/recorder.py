"""The engine-side half of the tap: numbers events per node, buffers them, and hands full
batches to the writer thread without ever waiting for it.

Memory is bounded: at most `queue_batches` batches of `batch_events` events wait for the writer.
When the queue is full the batch is dropped, not queued: its events keep their seq numbers (so
the hole shows in the ledger), and a gap marker (first and last seq lost, count, time) goes to
`tap/gaps-<stem>.jsonl`. The engine thread never blocks on disk."""

from __future__ import annotations

import os
import queue
import re
import threading
import time
from typing import Any

from forensics.tap.settings import EventIn, Row, Settings
from forensics.tap.writer import Writer

# seq = start second × 2^32 + event number: a node's seq keeps growing across engine restarts.
SEQ_SHIFT = 32


def file_stem(node: str, start_s: int) -> str:
    """A file-name-safe stem for this process's files: node, the second it started (ten digits
    until the year 2286) and process id. A node's files then sort in the order its processes
    started, which is the order ingest gives their events (their input order), also across a
    restart whose process id is lower than the one before."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", node) + f"-{start_s:010d}-{os.getpid()}"


class Recorder:
    """Buffers ledger rows and contents rows; `close()` flushes and waits for the writer."""

    def __init__(self, settings: Settings):
        self.settings = settings
        self.node = settings.node
        start_s = int(time.time())
        self.stem = file_stem(settings.node, start_s)
        self._seq = start_s << SEQ_SHIFT
        self._cur: list[Row] = []
        self._contents: list[tuple[str, list[int], list[int], list[int] | None]] = []
        self._lock = threading.Lock()
        self._last_handoff = time.monotonic()
        self._queue: queue.Queue[tuple[str, list[Any]]] = queue.Queue(settings.queue_batches)
        self.recorded = 0
        self.dropped = 0
        self.gaps: list[dict[str, Any]] = []
        self._closed = False
        self.writer = Writer(self, settings)
        self.writer.start()

    # ---- engine thread ----------------------------------------------------------------------
    def rows(self, rows: list[EventIn]) -> None:
        """Record events (request_id, op, slot_start, slot_count, pos_start, source,
        content_hash), in order, all stamped now."""
        if not rows or self._closed:
            return
        ts = time.time_ns() // 1000
        with self._lock:
            seq = self._seq
            self._cur.extend((ts, seq + k + 1, *r) for k, r in enumerate(rows))
            self._seq = seq + len(rows)
            self.recorded += len(rows)
            full = len(self._cur) >= self.settings.batch_events
        if full:
            self._handoff()

    def content(
        self, request_id: str, prompt: list[int], output: list[int], processed: list[int] | None
    ) -> None:
        """Record a finished request's token ids (only when contents were asked for)."""
        if self.settings.contents and not self._closed:
            with self._lock:
                self._contents.append((request_id, list(prompt), list(output), processed))

    def _take(self) -> tuple[list[Row], list[Any]]:
        with self._lock:
            batch, self._cur = self._cur, []
            contents, self._contents = self._contents, []
        return batch, contents

    def _handoff(self) -> None:
        """Queue the current batch, or drop it with a gap marker when the writer is behind."""
        batch, contents = self._take()
        self._last_handoff = time.monotonic()
        for kind, items in (("events", batch), ("contents", contents)):
            if not items:
                continue
            try:
                self._queue.put_nowait((kind, items))
            except queue.Full:
                self._drop(kind, items)

    def _drop(self, kind: str, items: list[Any]) -> None:
        gap: dict[str, Any] = {
            "ts": time.time_ns() // 1000,
            "node": self.node,
            "kind": kind,
            "dropped": len(items),
        }
        if kind == "events":
            gap["first_seq"], gap["last_seq"] = items[0][1], items[-1][1]
        with self._lock:
            self.dropped += len(items) if kind == "events" else 0
            self.gaps.append(gap)

    # ---- writer thread ----------------------------------------------------------------------
    def next_batch(self, timeout: float) -> tuple[str, list[Any]] | None:
        """The next queued batch; on an idle engine, what is buffered after `flush_s`."""
        try:
            return self._queue.get(timeout=timeout)
        except queue.Empty:
            pass
        if time.monotonic() - self._last_handoff >= self.settings.flush_s:
            self._handoff()
        return None

    def take_gaps(self) -> list[dict[str, Any]]:
        with self._lock:
            gaps, self.gaps = self.gaps, []
        return gaps

    def close(self) -> None:
        """Flush everything buffered and wait for the writer to close its files."""
        if self._closed:
            return
        batch, contents = self._take()
        self._closed = True
        self.writer.finish(batch, contents)
