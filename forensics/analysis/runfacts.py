"""Exposure runs from their pieces, node by node: what the exposures table says of each run.

The sweep emits one exposure piece per (read, write) pair it finds; a node's pieces are then
numbered into runs (forensics.analysis.coverage.run_numbers) and put in run order. A run's row
needs, besides its pieces' slots, three columns of the events they name: when each read and
write happened, the write's token positions, and where its data came from. Those columns are
fetched for the named events only (queries/analysis/exposure_events.sql), once per event
however many pieces name it, and one compiled pass folds each run's pieces into its row:

- slot_start, slot_count: the run's slots (its pieces' lowest start to highest end);
- leaker_pos_min/max: the leaker's token positions the run holds (per piece, the write's
  position of its first slot, pos_start - slot_start added to the piece's slots);
- prompt_source / generated_source: whether a piece's write came from prefill or transfer
  (prompt) or decode (generated); by_position (and its lowest and highest position): the
  pieces whose write gives another or no source, judged later by the leaker's prompt_tokens
  (queries/analysis/exposures.sql);
- first/last read and write: the earliest and latest time stamp among the run's reads and
  writes.

Pieces name events by ref, an index into the node's named keys (event_refs), so each event's
columns are looked up by index, not searched for."""

from __future__ import annotations

from typing import NamedTuple

import duckdb
import numpy as np
import pyarrow as pa
from numba import njit

from forensics.analysis.arrow import as_numpy, from_numpy, repeated
from forensics.sql import ident, sql, template

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


def event_refs(
    read: np.ndarray, write: np.ndarray, events: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The events that pieces name, given their read and write events as places in the node's
    order (of `events`): (the named places, ascending; each piece's read and write as an index
    into them). Takes an int32 per event for the time of the call."""
    ref = np.full(events, -1, np.int32 if events <= np.iinfo(np.int32).max else np.int64)
    return _refs(np.asarray(read, np.int64), np.asarray(write, np.int64), ref)


@njit(cache=True, nogil=True)
def _refs(read, write, ref):  # type: ignore[no-untyped-def]
    events = ref.shape[0]
    for i in range(read.shape[0]):
        ref[read[i]] = 0
        ref[write[i]] = 0
    named = 0
    for p in range(events):
        if ref[p] == 0:
            ref[p] = named
            named += 1
    places = np.empty(named, np.int64)
    for p in range(events):
        if ref[p] >= 0:
            places[ref[p]] = p
    read_ref = np.empty(read.shape[0], np.int64)
    write_ref = np.empty(read.shape[0], np.int64)
    for i in range(read.shape[0]):
        read_ref[i] = ref[read[i]]
        write_ref[i] = ref[write[i]]
    return places, read_ref, write_ref


def event_facts(
    con: duckdb.DuckDBPyConnection, keys: np.ndarray, events: str = "kv_events"
) -> EventFacts:
    """The columns of the events whose keys (kv_events.input_order) are `keys`, in that order,
    from the relation `events` (kv_events, or a partition task's view of its named events)."""
    if len(keys) == 0:
        empty = np.empty(0, np.int64)
        return EventFacts(empty, empty, np.empty(0, np.int8))
    con.register("_exposure_keys", pa.table({"event_key": from_numpy(keys)}))
    try:
        got = con.sql(
            template(sql("analysis/exposure_events"), events=ident(events)),
            params={"lo": int(keys.min()), "hi": int(keys.max())},
        ).to_arrow_table()
    finally:
        con.unregister("_exposure_keys")
    if got.num_rows != len(keys) or any(c.null_count for c in got.columns):
        raise ValueError(
            f"{len(keys) - got.num_rows} of the {len(keys)} events that exposure pieces name "
            "are missing from the ledger, or lack a time stamp or position: the case database "
            "changed during the analysis"
        )
    cols = {name: as_numpy(got.column(name).combine_chunks()) for name in got.column_names}
    at = np.argsort(keys, kind="stable")  # the keys' rows in key order
    by_key = np.argsort(cols["event_key"], kind="stable")
    place = np.empty(len(keys), np.int64)
    place[at] = by_key  # row of the fetched table holding keys[i]
    if not np.array_equal(cols["event_key"][place], keys):
        raise ValueError("the events that exposure pieces name repeat in the ledger")
    return EventFacts(
        cols["ts_us"][place], cols["pos_offset"][place], cols["source_code"][place].astype(np.int8)
    )


def fold_runs(pieces: np.ndarray, facts: EventFacts) -> ExposureRuns:
    """One row per run of `pieces` (rows [read ref, write ref, kind, slot_start, slot_end,
    receiver code, leaker code, run number], in run order: a run's pieces are consecutive)."""
    pieces = np.ascontiguousarray(pieces, np.int64)
    runs = np.count_nonzero(pieces[1:, 7] != pieces[:-1, 7]) + 1 if len(pieces) else 0
    ints = np.empty((len(ExposureRuns._fields), runs), np.int64)
    _fold(pieces, facts.ts, facts.pos_offset, facts.source, ints)
    cols = dict(zip(ExposureRuns._fields, ints, strict=True))
    for name in _FLAGS:
        cols[name] = cols[name].astype(np.int8)
    return ExposureRuns(**cols)


@njit(cache=True, nogil=True)
def _fold(p, ts, off, src, out):  # type: ignore[no-untyped-def]
    """out[field, run] for the fields of ExposureRuns, in their order."""
    g = -1
    for i in range(p.shape[0]):
        r, w, s0, s1 = p[i, 0], p[i, 1], p[i, 3], p[i, 4]
        lo = s0 + off[w]
        hi = s1 - 1 + off[w]
        if i == 0 or p[i, 7] != p[i - 1, 7]:  # a new run: its first piece
            g += 1
            out[0, g] = p[i, 5]
            out[1, g] = p[i, 6]
            out[2, g] = p[i, 2]
            out[3, g] = s0
            out[4, g] = s1  # the run's end, made a count below
            out[5, g] = lo
            out[6, g] = hi
            out[7, g] = 0
            out[8, g] = 0
            out[9, g] = 0
            out[10, g] = lo
            out[11, g] = hi
            out[12, g] = ts[r]
            out[13, g] = ts[r]
            out[14, g] = ts[w]
            out[15, g] = ts[w]
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
    for k in range(g + 1):
        out[4, k] -= out[3, k]


def runs_table(node: str, runs: ExposureRuns) -> pa.Table:
    """The node's runs as the rows of temp.analysis_exposure_runs."""
    n = len(runs.slot_start)
    utc = pa.timestamp("us", tz="UTC")
    cols: dict[str, pa.Array] = {"node": repeated(node, n).cast(pa.string())}
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


def no_runs() -> ExposureRuns:
    return fold_runs(np.empty((0, 8), np.int64), EventFacts(*(np.empty(0, np.int64),) * 3))
