"""Exposure runs folded from their pieces (forensics.analysis.runfacts) against a per-piece
reading of what each run's row means, and the events' columns as DuckDB gives them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import duckdb
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from forensics.analysis.runfacts import (
    BY_POSITION,
    GENERATED,
    PROMPT,
    EventFacts,
    ExposureRuns,
    event_facts,
    exposure_pieces,
    facts_at,
    fold_runs,
    renumbered,
    runs_table,
)
from forensics.casedb.sql import sql

pieces_strategy = st.lists(
    st.tuples(
        st.integers(0, 7),  # run
        st.integers(0, 9),  # read event, among its receiver's ten
        st.integers(0, 9),  # write event, among its leaker's ten
        st.integers(0, 50),  # slot_start
        st.integers(1, 9),  # slot count
    ),
    min_size=1,
    max_size=40,
)
facts_strategy = st.lists(
    st.tuples(
        st.integers(-(10**15), 10**15),  # time stamp, microseconds
        st.integers(-60, 60),  # pos_start - slot_start
        st.sampled_from([PROMPT, GENERATED, BY_POSITION]),
    ),
    min_size=60,
    max_size=60,
)
REQ = np.arange(60, dtype=np.int32) // 10  # events 10 q .. 10 q + 9 are request q's


def sweep_rows(pieces: list[tuple[int, ...]]) -> list[tuple[int, ...]]:
    """(run, read event, write event, slot_start, slot_end, kind) as the sweep would give them:
    run L is request L % 6 reading request (L + 1) % 6's data, of kind L % 3."""
    return [
        (run, 10 * (run % 6) + r, 10 * ((run + 1) % 6) + w, s0, s0 + n, run % 3)
        for run, r, w, s0, n in pieces
    ]


def naive_runs(rows: list[tuple[int, ...]], facts: list[tuple[int, int, int]]) -> list[dict]:
    """Each run's row from its pieces one by one, as the exposures query once grouped them."""
    out: dict[int, dict] = {}
    for run, r, w, s0, s1, kind in rows:
        off, src = facts[w][1], facts[w][2]
        lo, hi = s0 + off, s1 - 1 + off
        cur = out.setdefault(run, {"kind": kind, "r": r, "w": w, "pieces": []})
        cur["pieces"].append((s0, s1, lo, hi, src, facts[r][0], facts[w][0]))
    rows_out = []
    for run in sorted(out):
        c = out[run]
        p = c["pieces"]
        by = [(lo, hi) for _, _, lo, hi, src, _, _ in p if src == BY_POSITION]
        row = {
            "receiver_code": int(REQ[c["r"]]),
            "leaker_code": int(REQ[c["w"]]),
            "kind_code": c["kind"],
            "slot_start": min(x[0] for x in p),
            "slot_count": max(x[1] for x in p) - min(x[0] for x in p),
            "leaker_pos_min": min(x[2] for x in p),
            "leaker_pos_max": max(x[3] for x in p),
            "prompt_source": int(any(x[4] == PROMPT for x in p)),
            "generated_source": int(any(x[4] == GENERATED for x in p)),
            "by_position": len(by),
            "first_read_at": min(x[5] for x in p),
            "last_read_at": max(x[5] for x in p),
            "first_write_at": min(x[6] for x in p),
            "last_write_at": max(x[6] for x in p),
        }
        if by:
            row["by_position_lo"] = min(lo for lo, _ in by)
            row["by_position_hi"] = max(hi for _, hi in by)
        rows_out.append(row)
    return rows_out


@settings(max_examples=300, deadline=None)
@given(pieces_strategy, facts_strategy)
def test_fold_runs_gives_each_runs_row_as_its_pieces_say(pieces, facts):
    rows = sweep_rows(pieces)
    ex = np.array([[r, s0, s1, w, kind] for _, r, w, s0, s1, kind in rows], np.int64)
    label = np.array([row[0] for row in rows], np.int64)
    order = np.argsort(label, kind="stable")  # the runs as run_numbers would order them
    pieces_in_runs = exposure_pieces(ex, order, label[order], REQ)
    named = pieces_in_runs.named
    assert named.tolist() == sorted({e for row in rows for e in row[1:3]})
    ev = EventFacts(
        np.array([facts[e][0] for e in named], np.int64),
        np.array([facts[e][1] for e in named], np.int64),
        np.array([facts[e][2] for e in named], np.int8),
    )
    got = fold_runs(pieces_in_runs, ev)
    want = naive_runs(rows, facts)
    assert len(got.slot_start) == len(want)
    for i, row in enumerate(want):
        for name, value in row.items():
            assert int(getattr(got, name)[i]) == value, (i, name)


def test_no_pieces_make_no_runs():
    empty = np.empty(0, np.int64)
    pieces = exposure_pieces(np.empty((0, 5), np.int64), empty, empty, REQ)
    assert pieces.runs == 0 and len(pieces.named) == 0
    got = fold_runs(pieces, EventFacts(empty, empty, empty.astype(np.int8)))
    assert all(len(col) == 0 for col in got)


def _ledger(con: duckdb.DuckDBPyConnection) -> list[tuple]:
    base = datetime(2026, 3, 1, 12, 0, 0, 123456, tzinfo=UTC)
    rows = [
        # input_order, ts, slot_start, pos_start, source
        (7, base, 10, 0, "prefill"),
        (3, base + timedelta(microseconds=1), 4, 9, "decode"),
        (11, base - timedelta(days=400), 0, 5, None),
        (5, base + timedelta(seconds=3), 20, 20, "transfer"),
        (9, base, 1, 1, "other"),
    ]
    con.execute(
        "CREATE TABLE kv_events (input_order BIGINT, ts TIMESTAMPTZ, slot_start BIGINT, "
        "pos_start BIGINT, source VARCHAR)"
    )
    con.executemany("INSERT INTO kv_events VALUES (?, ?, ?, ?, ?)", rows)
    return rows


def test_event_facts_follow_the_keys_as_given():
    con = duckdb.connect()
    rows = {r[0]: r for r in _ledger(con)}
    keys = np.array([11, 3, 9, 7, 5], np.int64)  # not in key order, nor in the table's
    got = event_facts(con, keys)
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    codes = {"prefill": PROMPT, "transfer": PROMPT, "decode": GENERATED}
    for i, k in enumerate(keys.tolist()):
        _, ts, slot, pos, source = rows[k]
        assert got.ts[i] == (ts - epoch) // timedelta(microseconds=1)
        assert got.pos_offset[i] == pos - slot
        assert got.source[i] == codes.get(source, BY_POSITION)


def test_event_facts_refuse_a_missing_event():
    con = duckdb.connect()
    _ledger(con)
    with pytest.raises(ValueError, match="1 of the 2 events"):
        event_facts(con, np.array([3, 4], np.int64))


def test_runs_table_keeps_time_stamps_to_the_microsecond():
    con = duckdb.connect()
    rows = _ledger(con)
    us = event_facts(con, np.array([r[0] for r in rows], np.int64)).ts
    one = np.ones(len(us), np.int64)
    runs = ExposureRuns(*(one,) * 12, us, us, us, us)  # type: ignore[arg-type]
    table = runs_table("node-a", renumbered(runs, np.array([0, 5], np.int64)))
    con.register("t", table)
    back = con.execute("SELECT first_read_at, receiver_code, node FROM t").fetchall()
    assert [b[0] for b in back] == [r[1] for r in rows]
    assert {(b[1], b[2]) for b in back} == {(5, "node-a")}


def _named_facts(con: duckdb.DuckDBPyConnection) -> pa.Table:
    """queries/analysis/named_event_facts.sql over a view of the test ledger, as a partition
    task reads it: every named event, those of violation pieces (an alloc without a position,
    key 13) among them."""
    con.execute(
        "INSERT INTO kv_events VALUES (13, TIMESTAMPTZ '2026-03-01 12:00:00+00', 2, NULL, NULL)"
    )
    con.execute("CREATE VIEW kv_named_events AS SELECT * FROM kv_events")
    return con.sql(sql("analysis/named_event_facts")).to_arrow_table()


def test_facts_of_named_events_leave_the_other_events_out():
    con = duckdb.connect()
    rows = {r[0]: r for r in _ledger(con)}
    facts = _named_facts(con)
    keys = np.array([5, 11, 3], np.int64)
    got = facts_at(facts, keys)
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    assert got.ts.tolist() == [(rows[k][1] - epoch) // timedelta(microseconds=1) for k in keys]
    assert got.pos_offset.tolist() == [20 - 20, 5 - 0, 9 - 4]
    assert got.source.tolist() == [PROMPT, BY_POSITION, GENERATED]
    assert len(facts_at(facts, np.empty(0, np.int64)).ts) == 0


def test_facts_of_named_events_refuse_an_event_without_position_or_missing():
    con = duckdb.connect()
    _ledger(con)
    facts = _named_facts(con)
    with pytest.raises(ValueError, match="1 of the 2 events"):
        facts_at(facts, np.array([13, 3], np.int64))  # 13 has no position
    with pytest.raises(ValueError, match="2 of the 3 events"):
        facts_at(facts, np.array([3, 4, 99], np.int64))  # neither 4 nor 99 is there


def test_facts_of_named_events_refuse_an_event_read_twice():
    con = duckdb.connect()
    _ledger(con)
    twice = pa.concat_tables([_named_facts(con)] * 2)
    with pytest.raises(ValueError, match="repeat"):
        facts_at(twice, np.array([3], np.int64))


@settings(max_examples=80, deadline=None)
@given(
    fetched=st.lists(st.integers(0, 3), min_size=1, max_size=30),  # part ranks
    rows=st.lists(st.integers(0, 400), min_size=1, max_size=30),
    asked=st.lists(st.integers(0, 60), min_size=1, max_size=40),
    sparse=st.booleans(),
)
def test_named_facts_are_found_by_key_however_the_keys_spread(fetched, rows, asked, sparse):
    """Events fetched in any order, their keys those of rows of a few parts (a part's rank
    times 2^40 plus its row: looked up through a table) or far apart (sorted and searched):
    each key asked for gets its own event's facts, against a dict; a key not fetched, or
    fetched twice, is refused."""
    step = 1 << 40 if sparse else 1000
    keys = sorted({r * step + row for r, row in zip(fetched, rows, strict=False)})
    rng = np.random.default_rng(len(keys))
    order = rng.permutation(len(keys))
    shuffled = np.array(keys, np.int64)[order]
    got = pa.table(
        {
            "event_key": shuffled,
            "ts_us": shuffled * 3,
            "pos_offset": shuffled % 7,
            "source_code": (shuffled % 3).astype(np.int8),
            "complete": np.ones(len(keys), np.int8),
        }
    )
    ask = np.array([keys[i % len(keys)] for i in asked], np.int64)
    facts = facts_at(got, ask)
    assert facts.ts.tolist() == (ask * 3).tolist()
    assert facts.pos_offset.tolist() == (ask % 7).tolist()
    assert facts.source.tolist() == (ask % 3).tolist()
    absent = max(keys) + 1 if sparse else min(keys) - 1
    if absent >= 0:
        with pytest.raises(ValueError, match="1 of the 2 events"):
            facts_at(got, np.array([keys[0], absent], np.int64))
    with pytest.raises(ValueError, match="repeat"):
        facts_at(pa.concat_tables([got, got.slice(0, 1)]), ask)
