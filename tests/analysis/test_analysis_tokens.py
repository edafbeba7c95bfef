"""exposure_tokens (queries/analysis/exposure_tokens.sql) against per-slot sets: exposure runs of
one pair that overlap, touch or nest across kinds, read at different times, with known and
unknown accounts. The runs are given as the sweep leaves them (temp.analysis_exposure_runs, by
request code), the accounts through the request log, as the analysis gives them."""

from __future__ import annotations

from collections import defaultdict

import duckdb
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st
from support.analysis_case import at, insert, new_case, request_row

from forensics.analysis.codes import EXPOSURE_KINDS
from forensics.casedb.sql import run_script, sql

ACCOUNTS = {"r0": "acct-a", "r1": "acct-b", "r2": None}  # r2: not in the request log

runs = st.lists(
    st.tuples(
        st.sampled_from(sorted(ACCOUNTS)),  # receiver
        st.sampled_from(sorted(ACCOUNTS)),  # leaker
        st.sampled_from(["n0", "n1"]),
        st.sampled_from(EXPOSURE_KINDS),
        st.integers(0, 30),  # slot_start
        st.integers(1, 9),  # slot_count
        st.integers(0, 1000),  # first read, microseconds
        st.integers(0, 50),  # last read after the first
    ),
    max_size=40,
)


_CASE: list[duckdb.DuckDBPyConnection] = []


def _case() -> duckdb.DuckDBPyConnection:
    """One case database with the analysis tables for every example (making one takes longer
    than an example): r0 and r1 in the request log, r2 not; request codes in id order."""
    if not _CASE:
        con = new_case()
        run_script(con, sql("schema/analysis"))
        insert(
            con,
            "requests",
            [request_row(r, a) for r, a in ACCOUNTS.items() if a is not None],
        )
        run_script(con, sql("analysis/requests"), {"ledger_loaded": True})
        con.execute(
            "CREATE OR REPLACE TABLE work.analysis_request_codes AS SELECT request_id, "
            "CAST(row_number() OVER (ORDER BY request_id) - 1 AS INTEGER) AS req_code "
            f"FROM (SELECT unnest({sorted(ACCOUNTS)}) AS request_id)"
        )
        _CASE.append(con)
    return _CASE[0]


def insert_runs(con: duckdb.DuckDBPyConnection, rows: list[tuple]) -> None:
    """The exposure runs (receiver, leaker, node, kind, slot_start, slot_count, first read,
    read span) as temp.analysis_exposure_runs holds them."""
    run_script(con, sql("analysis/pieces_create"))
    if not rows:
        return
    code = {r: i for i, r in enumerate(sorted(ACCOUNTS))}
    table = pa.Table.from_pylist(
        [
            {
                "node": node,
                "receiver_code": code[r],
                "leaker_code": code[w],
                "kind_code": EXPOSURE_KINDS.index(kind),
                "slot_start": s,
                "slot_count": n,
                "first_read_at": at(t),
                "last_read_at": at(t + dt),
            }
            for r, w, node, kind, s, n, t, dt in rows
        ]
    )
    con.register("_rows", table)
    try:
        con.execute("INSERT INTO temp.analysis_exposure_runs BY NAME SELECT * FROM _rows")
    finally:
        con.unregister("_rows")


@settings(max_examples=60, deadline=None)
@given(runs)
def test_tokens_are_distinct_slots_per_pair_whatever_the_kind(rows):
    con = _case()
    insert_runs(con, rows)
    run_script(con, sql("analysis/exposure_tokens"))
    got = {
        (r, node, w): rest
        for r, node, w, *rest in con.execute(
            "SELECT receiver_request_id, node, leaker_request_id, tokens, first_read_at,"
            " last_read_at, receiver_account_id, leaker_account_id, cross_account"
            " FROM exposure_tokens"
        ).fetchall()
    }
    slots: dict[tuple[str, str, str], set[int]] = defaultdict(set)
    reads: dict[tuple[str, str, str], list[int]] = defaultdict(list)
    for r, w, node, _kind, s, n, t, dt in rows:
        slots[(r, node, w)].update(range(s, s + n))
        reads[(r, node, w)] += [t, t + dt]
    want = {
        (r, node, w): [
            len(covered),
            at(min(reads[(r, node, w)])),
            at(max(reads[(r, node, w)])),
            ACCOUNTS[r],
            ACCOUNTS[w],
            None if ACCOUNTS[r] is None or ACCOUNTS[w] is None else ACCOUNTS[r] != ACCOUNTS[w],
        ]
        for (r, node, w), covered in slots.items()
    }
    assert got == want
