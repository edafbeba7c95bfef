"""The analysis' memory: DuckDB and the sweep's arrays share the case's memory limit.

DuckDB keeps its own work within the connection's memory limit, but the compiled sweep's
arrays live beside it: a node's events, its cells, the sweep's maps and output buffers
(node_need: its worst moment from its counts of events, reads and allocations, as measured; a
partition of an external ledger swept by a Ray task, whose counts are not known before the
task reads it, BYTES_PER_EVENT per event). While the sweep runs, DuckDB only streams each
node's events out (for an external ledger, each partition task's own DuckDB reads and codes its
events, within its share of DuckDB's part), so it gets DUCKDB_STREAM_SHARE of the limit, at
least DUCKDB_FLOOR, and the sweep the rest; its limit is set back, as DuckDB reported it,
afterwards. A node's share is held from its load until it is swept, so only as many nodes are
in memory at once as fit in the sweep's part (two big nodes may be swept one after the other).
A node that alone needs more runs alone.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import duckdb

from forensics.casedb.dbopen import memory_limit_bytes, size_bytes
from forensics.casedb.sql import literal, one_row, run, sql

BYTES_PER_EVENT = 48  # a node's arrays at their peak, when its mix is not known
BYTES_PER_NODE = 96 << 20  # the holder pools, run maps and first output buffers of a node's sweep

# A node of the case database (forensics.analysis.fetch, .order and .sweep), in bytes:
CODES = 9  # per event, all along: request and content-hash codes (int32) and op (int8)
CELLS = 8  # per event, from the sweep on: its cells [c0, c1) (int32 each)
READ_ROW = 16  # per read, in the sweep: its category rows (int32 x 4, one per read at least)
ACQUISITION = 8  # per alloc or share, in the sweep: each request's list of them (int64)
SLACK = 3  # per event, in the sweep: holder pools grown past BYTES_PER_NODE, temporaries
# (measured: 2.3 at 57 M events)
RANKED = 16  # per event, loading a node whose keys are not dense: the rank and the order
# (int64 each), then the order and the one column being put in order


def node_need(
    events: int,
    reads: int,
    acquisitions: int,
    *,
    key_bytes: int,
    slot_bytes: int,
    ranked: bool,
    cells_apart: bool,
) -> int:
    """A node's arrays at their worst moment: loading (the columns and slot ranges, with the
    rank and order when its keys are not dense), making cells (in the slot ranges' own arrays,
    or, cells_apart, beside them, after sorting copies of the range ends) or the sweep (the
    columns, cells and its buffers). key_bytes: per event for its keys (0 when dense);
    slot_bytes: per range end (4 or 8)."""
    held = CODES + key_bytes
    load = held + 2 * slot_bytes + (RANKED if ranked else 0)
    cells = held + 2 * slot_bytes + (max(CELLS, 3 * slot_bytes + 1) if cells_apart else 0)
    sweep = (held + CELLS + SLACK) * events + READ_ROW * reads + ACQUISITION * acquisitions
    return BYTES_PER_NODE + max(load * events, cells * events, sweep)


DUCKDB_SHARE = 0.25  # of the memory limit, for DuckDB while a sweep runs beside it,
# or this much while it only streams out and codes the events (its hash tables are those of the
# request and content-hash codes): the analysis' sweeps, of a loaded or an external ledger
DUCKDB_STREAM_SHARE = 0.125
DUCKDB_FLOOR = 256 << 20  # but at least this much (or the whole limit, when it is smaller)


def task_need(events: int) -> int:
    """What a Ray task sweeping an external partition of `events` events may hold (its reads
    and allocations are not counted before it reads them): its arrays' estimated peak at
    BYTES_PER_EVENT, and the least DuckDB gets beside them."""
    return BYTES_PER_NODE + BYTES_PER_EVENT * events + DUCKDB_FLOOR


def memory_limit(con: duckdb.DuckDBPyConnection) -> int:
    """DuckDB's memory limit in bytes (as precise as DuckDB reports it)."""
    return memory_limit_bytes(con)


class MemoryBudget:
    """Bytes the sweep may hold at once; threads take a node's share before they load it and
    give it back once the node is swept."""

    def __init__(self, total: int, duckdb_bytes: int = 0) -> None:
        self.total = max(1, total)
        self.duckdb_bytes = duckdb_bytes  # what DuckDB has meanwhile (its limit during the sweep)
        self.held = 0
        self._changed = threading.Condition()

    def need(self, events: int, nbytes: int | None = None) -> int:
        """A node's share: its estimated peak (nbytes, or BYTES_PER_EVENT per event), at most
        the whole budget."""
        if nbytes is None:
            nbytes = BYTES_PER_NODE + BYTES_PER_EVENT * events
        return min(self.total, nbytes)

    def more(self, held: int, nbytes: int) -> int:
        """Take nbytes more for a node holding `held` (as far as the whole budget allows; waits
        as take does); returns what the node holds now."""
        extra = max(0, min(nbytes, self.total - held))
        self.take(extra)
        return held + extra

    def take(self, nbytes: int) -> None:
        """Wait until nbytes fit beside what is held (or nothing is held), then hold them."""
        with self._changed:
            while self.held and self.held + nbytes > self.total:
                self._changed.wait()
            self.held += nbytes

    def give(self, nbytes: int) -> None:
        with self._changed:
            self.held -= nbytes
            self._changed.notify_all()


@contextmanager
def sweep_budget(
    con: duckdb.DuckDBPyConnection, share: float = DUCKDB_SHARE
) -> Iterator[MemoryBudget]:
    """The sweep's budget, with DuckDB's limit lowered to its share while the sweep runs and
    set back afterwards."""
    setting = _setting(con)  # set back as read (a connection opened otherwise has no variable)
    limit = size_bytes(setting)
    duckdb_part = min(limit, max(int(limit * share), DUCKDB_FLOOR))
    _set_limit(con, f"{max(1, duckdb_part >> 10)}KiB")
    try:
        yield MemoryBudget(limit - duckdb_part, duckdb_part)
    except BaseException:
        # A DuckDB error aborts the transaction, which then refuses the SET: the error that
        # stopped the sweep is the one to report (the caller resets the limit once it has
        # rolled back: reset_limit).
        with contextlib.suppress(duckdb.Error):
            _set_limit(con, setting)
        raise
    _set_limit(con, setting)


def reset_limit(con: duckdb.DuckDBPyConnection) -> None:
    """DuckDB's memory limit back to the one the connection was opened with (as
    forensics.casedb.dbopen recorded it)."""
    _set_limit(con, _setting(con))


def _set_limit(con: duckdb.DuckDBPyConnection, size: str) -> None:
    run(con, "analysis/memory_limit_set", limit=literal(size))


def _setting(con: duckdb.DuckDBPyConnection) -> str:
    row = one_row(con.execute(sql("schema/memory_limit")))
    return str(row[0]) if row else "0B"
