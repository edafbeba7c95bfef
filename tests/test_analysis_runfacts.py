"""Exposure runs folded from their pieces (forensics.analysis.runfacts) against a per-piece
reading of what each run's row means, and the events' columns as DuckDB gives them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import duckdb
import numpy as np
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
    event_refs,
    fold_runs,
    renumbered,
    runs_table,
)

pieces_strategy = st.lists(
    st.tuples(
        st.integers(0, 4),  # run (pieces are sorted by it below)
        st.integers(0, 9),  # read event
        st.integers(0, 9),  # write event
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
    min_size=10,
    max_size=10,
)


def naive_runs(rows: list[tuple[int, ...]], facts: list[tuple[int, int, int]]) -> list[dict]:
    """Each run's row from its pieces one by one, as the exposures query once grouped them."""
    out: dict[int, dict] = {}
    for run, r, w, s0, n, recv, leak, kind in rows:
        ts_r, ts_w = facts[r][0], facts[w][0]
        off, src = facts[w][1], facts[w][2]
        lo, hi = s0 + off, s0 + n - 1 + off
        cur = out.setdefault(
            run,
            {
                "receiver": recv,
                "leaker": leak,
                "kind": kind,
                "s0": [],
                "s1": [],
                "lo": [],
                "hi": [],
                "src": [],
                "by": [],
                "reads": [],
                "writes": [],
            },
        )
        cur["s0"].append(s0)
        cur["s1"].append(s0 + n)
        cur["lo"].append(lo)
        cur["hi"].append(hi)
        cur["src"].append(src)
        if src == BY_POSITION:
            cur["by"].append((lo, hi))
        cur["reads"].append(ts_r)
        cur["writes"].append(ts_w)
    rows_out = []
    for run in sorted(out):
        c = out[run]
        row = {
            "receiver_code": c["receiver"],
            "leaker_code": c["leaker"],
            "kind_code": c["kind"],
            "slot_start": min(c["s0"]),
            "slot_count": max(c["s1"]) - min(c["s0"]),
            "leaker_pos_min": min(c["lo"]),
            "leaker_pos_max": max(c["hi"]),
            "prompt_source": int(PROMPT in c["src"]),
            "generated_source": int(GENERATED in c["src"]),
            "by_position": len(c["by"]),
            "first_read_at": min(c["reads"]),
            "last_read_at": max(c["reads"]),
            "first_write_at": min(c["writes"]),
            "last_write_at": max(c["writes"]),
        }
        if c["by"]:
            row["by_position_lo"] = min(lo for lo, _ in c["by"])
            row["by_position_hi"] = max(hi for _, hi in c["by"])
        rows_out.append(row)
    return rows_out


@settings(max_examples=300, deadline=None)
@given(pieces_strategy, facts_strategy)
def test_fold_runs_gives_each_runs_row_as_its_pieces_say(pieces, facts):
    rows = sorted((run, r, w, s0, n, 100 + run, 200 + run, run % 3) for run, r, w, s0, n in pieces)
    arr = np.array(
        [[r, w, kind, s0, s0 + n, recv, leak, run] for run, r, w, s0, n, recv, leak, kind in rows],
        np.int64,
    )
    ev = EventFacts(
        np.array([f[0] for f in facts], np.int64),
        np.array([f[1] for f in facts], np.int64),
        np.array([f[2] for f in facts], np.int8),
    )
    got = fold_runs(arr, ev)
    want = naive_runs(rows, facts)
    assert len(got.slot_start) == len(want)
    for i, row in enumerate(want):
        for name, value in row.items():
            assert int(getattr(got, name)[i]) == value, (i, name)


def test_fold_runs_of_no_pieces_is_empty():
    empty = np.empty(0, np.int64)
    got = fold_runs(np.empty((0, 8), np.int64), EventFacts(empty, empty, empty.astype(np.int8)))
    assert all(len(col) == 0 for col in got)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 30), st.integers(0, 30)), max_size=40))
def test_event_refs_name_each_event_once_in_order(pairs):
    read = np.array([p[0] for p in pairs], np.int64)
    write = np.array([p[1] for p in pairs], np.int64)
    named, read_ref, write_ref = event_refs(read, write, 31)
    assert named.tolist() == sorted({*read.tolist(), *write.tolist()})
    assert named[read_ref].tolist() == read.tolist()
    assert named[write_ref].tolist() == write.tolist()


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
