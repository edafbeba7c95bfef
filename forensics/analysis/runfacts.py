"""Exposure runs from their pieces, node by node: what the exposures table says of each run.

The sweep emits one exposure piece per (read, write) pair it finds; a node's pieces are then
numbered into runs (forensics.analysis.coverage.run_numbers) and put in run order. A run's row
needs, besides its pieces' slots, three columns of the events they name: when each read and
write happened, the write's token positions, and where its data came from. Those columns are
fetched for the named events only (queries/analysis/exposure_events.sql from a loaded ledger;
from a ledger kept outside the database, queries/analysis/named_event_facts.sql, in one pass
over all of a partition task's named events), once per event however many pieces name it, and
one compiled pass folds each run's pieces into its row:

- slot_start, slot_count: the run's slots (its pieces' lowest start to highest end);
- leaker_pos_min/max: the leaker's token positions the run holds (per piece, the write's
  position of its first slot, pos_start - slot_start added to the piece's slots);
- prompt_source / generated_source: whether a piece's write came from prefill or transfer
  (prompt) or decode (generated); by_position (and its lowest and highest position): the
  pieces whose write gives another or no source, judged later by the leaker's prompt_tokens
  (queries/analysis/exposures.sql);
- first/last read and write: the earliest and latest time stamp among the run's reads and
  writes.

Pieces name events by ref, an index into the events the node's pieces name (exposure_pieces),
so each event's columns are looked up by index, not searched for. Each run's request codes and
kind are kept once per run, and nothing is held per piece but its two refs and its slots: a
node of a long-context ledger has millions of pieces."""

from __future__ import annotations

from typing import NamedTuple

import duckdb
import numpy as np
import pyarrow as pa
from numba import njit

import forensics.base.jitcache  # noqa: F401  (a stale compiled-code cache is recompiled)
from forensics.base.arrow import from_numpy, repeated, whole_numpy
from forensics.casedb.sql import sql

PROMPT, GENERATED, BY_POSITION = 0, 1, 2  # source codes of queries/analysis/exposure_events.sql


class EventFacts(NamedTuple):
    """The columns of the named events, aligned with the node's named keys."""

    ts: np.ndarray  # int64 microseconds since the epoch
    pos_offset: np.ndarray  # int64 pos_start - slot_start: slot s holds position s + offset
    source: np.ndarray  # int8 PROMPT, GENERATED or BY_POSITION


class ExposureRuns(NamedTuple):
    """One row per exposure run of a node (int64 columns but the flags, which are int8)."""

    receiver_code: np.ndarray
    leaker_code: np.ndarray
    kind_code: np.ndarray
    slot_start: np.ndarray
    slot_count: np.ndarray
    leaker_pos_min: np.ndarray
    leaker_pos_max: np.ndarray
    prompt_source: np.ndarray
    generated_source: np.ndarray
    by_position: np.ndarray
    by_position_lo: np.ndarray  # meaningful where by_position > 0
    by_position_hi: np.ndarray
    first_read_at: np.ndarray  # microseconds since the epoch
    last_read_at: np.ndarray
    first_write_at: np.ndarray
    last_write_at: np.ndarray


_TIMES = ("first_read_at", "last_read_at", "first_write_at", "last_write_at")
_FLAGS = ("prompt_source", "generated_source")


class ExposurePieces(NamedTuple):
    """A node's exposure pieces in run order, with what each run's pieces share."""

    run_start: np.ndarray  # int64 [runs + 1]: run k's pieces are [run_start[k], run_start[k + 1])
    receiver: np.ndarray  # int64 per run: the reading request's code
    leaker: np.ndarray  # int64 per run: the writing request's code
    kind: np.ndarray  # int64 per run: the exposure kind's code
    read_ref: np.ndarray  # int64 per piece: its read event, an index into `named`
    write_ref: np.ndarray  # int64 per piece: its write event, an index into `named`
    slot_start: np.ndarray  # int64 per piece: its slots, [slot_start, slot_end)
    slot_end: np.ndarray
    named: np.ndarray  # int64: the events the pieces name, ascending in the node's order

    @property
    def runs(self) -> int:
        return len(self.run_start) - 1


def exposure_pieces(
    ex: np.ndarray, order: np.ndarray, run: np.ndarray, req: np.ndarray
) -> ExposurePieces:
    """The sweep's exposure pieces (rows [read event, slot_start, slot_end, write event, kind],
    events as places in the node's order of its events with request codes `req`) put in run
    order: `order` sorts them into runs, run[i] is the run of the i-th piece in that order
    (forensics.analysis.coverage.run_numbers). The events they name are numbered once each,
    taking an int32 per event for the time of the call."""
    ref = np.full(len(req), -1, np.int32 if len(req) <= np.iinfo(np.int32).max else np.int64)
    runs = int(np.count_nonzero(run[1:] != run[:-1])) + 1 if len(run) else 0

    def per_run() -> np.ndarray:
        return np.empty(runs, np.int64)

    def per_piece() -> np.ndarray:
        return np.empty(len(order), np.int64)

    pieces = ExposurePieces(
        run_start=np.zeros(runs + 1, np.int64),
        receiver=per_run(),
        leaker=per_run(),
        kind=per_run(),
        read_ref=per_piece(),
        write_ref=per_piece(),
        slot_start=per_piece(),
        slot_end=per_piece(),
        named=np.empty(0, np.int64),
    )
    named = _gather(ex, order, run, req, ref, pieces)
    return pieces._replace(named=named)


def no_pieces() -> ExposurePieces:
    """A node's exposure pieces once its runs stand for them (none held)."""
    empty = np.empty(0, np.int64)
    return exposure_pieces(np.empty((0, 5), np.int64), empty, empty, empty)


@njit(cache=True, nogil=True)
def _gather(ex, order, run, req, ref, p):  # type: ignore[no-untyped-def]
    """Fill p (but `named`) from the sweep's rows; returns the named places."""
    for i in range(ex.shape[0]):
        ref[ex[i, 0]] = 0
        ref[ex[i, 3]] = 0
    named = 0
    for e in range(ref.shape[0]):
        if ref[e] == 0:
            ref[e] = named
            named += 1
    places = np.empty(named, np.int64)
    for e in range(ref.shape[0]):
        if ref[e] >= 0:
            places[ref[e]] = e
    k = -1
    for i in range(order.shape[0]):
        row = order[i]
        if i == 0 or run[i] != run[i - 1]:  # the first piece of a run
            k += 1
            p.run_start[k] = i
            p.receiver[k] = req[ex[row, 0]]
            p.leaker[k] = req[ex[row, 3]]
            p.kind[k] = ex[row, 4]
        p.read_ref[i] = ref[ex[row, 0]]
        p.write_ref[i] = ref[ex[row, 3]]
        p.slot_start[i] = ex[row, 1]
        p.slot_end[i] = ex[row, 2]
    p.run_start[k + 1] = order.shape[0]
    return places


def event_facts(con: duckdb.DuckDBPyConnection, keys: np.ndarray) -> EventFacts:
    """The columns of the events whose keys (kv_events.input_order) are `keys`, in that order,
    from kv_events."""
    if len(keys) == 0:
        return _no_facts()
    con.register("_exposure_keys", pa.table({"event_key": from_numpy(keys)}))
    try:
        got = con.sql(
            sql("analysis/exposure_events"), params={"lo": int(keys.min()), "hi": int(keys.max())}
        ).to_arrow_table()
    finally:
        con.unregister("_exposure_keys")
    return facts_at(got, keys)


def facts_at(got: pa.Table, keys: np.ndarray) -> EventFacts:
    """The rows of `got` (queries/analysis/exposure_events.sql's columns, each event at most
    once, in any order, and maybe more events than `keys`) of the events whose keys are
    `keys`, in that order. Every key must be there, with its time stamp and position."""
    if len(keys) == 0:
        return _no_facts()
    cols = {name: whole_numpy(got.column(name)) for name in got.column_names}
    place = _rows_of(cols["event_key"], np.asarray(keys, np.int64))
    complete = place >= 0
    complete[complete] = cols["complete"][place[complete]] == 1
    if not complete.all():
        raise ValueError(
            f"{int(np.count_nonzero(~complete))} of the {len(keys)} events that exposure "
            "pieces name are missing from the ledger, or lack a time stamp or position: the "
            "case database changed during the analysis"
        )
    return EventFacts(
        cols["ts_us"][place], cols["pos_offset"][place], cols["source_code"][place].astype(np.int8)
    )


# The fetched events' keys are looked up through a table over their span where it holds at
# most this many entries per event fetched: a part's keys are its rows (queries/ingest/
# validate_kv_events.sql), and a task reads the events its pieces name from a few parts.
TABLE_SPAN = 8


def _rows_of(fetched: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """For each of `keys`, the index in `fetched` of the same key, or -1 where it is not
    there. A key fetched twice is an error. Where the fetched keys span few values for their
    number (TABLE_SPAN), through a table indexed by key, else by sorting them (facts_at took
    0.014 to 0.021 s that way on the long bench mix's decode tasks, 0.022 to 0.036 s sorting:
    the facts come from DuckDB in no order)."""
    n = len(fetched)
    if n == 0:
        return np.full(len(keys), -1, np.int64)
    lo, hi = int(fetched.min()), int(fetched.max())
    if hi - lo < TABLE_SPAN * n:
        table = np.full(hi - lo + 1, -1, np.int64)
        table[fetched - lo] = np.arange(n)
        if np.count_nonzero(table >= 0) < n:
            raise ValueError("the events that exposure pieces name repeat in the ledger")
        at = keys - lo
        inside = (at >= 0) & (at < len(table))
        rows = np.full(len(keys), -1, np.int64)
        rows[inside] = table[at[inside]]
        return rows
    by_key = np.argsort(fetched, kind="stable")
    ordered = fetched[by_key]
    if np.any(ordered[1:] == ordered[:-1]):
        raise ValueError("the events that exposure pieces name repeat in the ledger")
    at = np.minimum(np.searchsorted(ordered, keys), n - 1)  # where each key is, or would be
    return np.where(ordered[at] == keys, by_key[at], -1)


def _no_facts() -> EventFacts:
    empty = np.empty(0, np.int64)
    return EventFacts(empty, empty, np.empty(0, np.int8))


def fold_runs(pieces: ExposurePieces, facts: EventFacts) -> ExposureRuns:
    """One row per run of `pieces`, its events' columns in `facts` (aligned with pieces.named)."""
    ints = np.empty((len(ExposureRuns._fields), pieces.runs), np.int64)
    _fold(pieces, facts.ts, facts.pos_offset, facts.source, ints)
    cols = dict(zip(ExposureRuns._fields, ints, strict=True))
    for name in _FLAGS:
        cols[name] = cols[name].astype(np.int8)
    return ExposureRuns(**cols)


@njit(cache=True, nogil=True)
def _fold(p, ts, off, src, out):  # type: ignore[no-untyped-def]
    """out[field, run] for the fields of ExposureRuns, in their order."""
    for g in range(p.run_start.shape[0] - 1):
        a, b = p.run_start[g], p.run_start[g + 1]
        out[0, g] = p.receiver[g]
        out[1, g] = p.leaker[g]
        out[2, g] = p.kind[g]
        w = p.write_ref[a]
        out[3, g] = p.slot_start[a]
        out[4, g] = p.slot_end[a]  # the run's end, made a count below
        out[5, g] = p.slot_start[a] + off[w]
        out[6, g] = p.slot_end[a] - 1 + off[w]
        out[7, g] = 0
        out[8, g] = 0
        out[9, g] = 0
        out[10, g] = 0
        out[11, g] = 0
        out[12, g] = ts[p.read_ref[a]]
        out[13, g] = ts[p.read_ref[a]]
        out[14, g] = ts[w]
        out[15, g] = ts[w]
        for i in range(a, b):
            r, w = p.read_ref[i], p.write_ref[i]
            s0, s1 = p.slot_start[i], p.slot_end[i]
            lo = s0 + off[w]
            hi = s1 - 1 + off[w]
            out[3, g] = min(out[3, g], s0)
            out[4, g] = max(out[4, g], s1)
            out[5, g] = min(out[5, g], lo)
            out[6, g] = max(out[6, g], hi)
            if src[w] == PROMPT:
                out[7, g] = 1
            elif src[w] == GENERATED:
                out[8, g] = 1
            else:
                if out[9, g] == 0:
                    out[10, g] = lo
                    out[11, g] = hi
                out[9, g] += 1
                out[10, g] = min(out[10, g], lo)
                out[11, g] = max(out[11, g], hi)
            out[12, g] = min(out[12, g], ts[r])
            out[13, g] = max(out[13, g], ts[r])
            out[14, g] = min(out[14, g], ts[w])
            out[15, g] = max(out[15, g], ts[w])
        out[4, g] -= out[3, g]


def runs_table(node: str, runs: ExposureRuns) -> pa.Table:
    """The node's runs as the rows of temp.analysis_exposure_runs."""
    n = len(runs.slot_start)
    utc = pa.timestamp("us", tz="UTC")
    cols: dict[str, pa.Array] = {"node": repeated(node, n)}
    for name, values in zip(ExposureRuns._fields, runs, strict=True):
        column = from_numpy(values)
        if name in _TIMES:
            column = column.view(utc)
        cols[name] = column
    return pa.table(cols)


def renumbered(runs: ExposureRuns, to_global: np.ndarray) -> ExposureRuns:
    """runs with their request codes mapped through to_global."""
    return runs._replace(
        receiver_code=to_global[runs.receiver_code], leaker_code=to_global[runs.leaker_code]
    )
