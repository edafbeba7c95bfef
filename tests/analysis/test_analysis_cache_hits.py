"""Requests that may have read a stub's pages through the prefix cache (queries/analysis/
possible_cache_hits.sql): an engine that takes a stub's prompt as computed caches the blocks it
handed the stub under that prompt's hashes, and a later request whose prompt begins alike is
served them and reads what their earlier owners left. Each case's answer follows from that
rule by hand."""

from __future__ import annotations

from typing import Any

import duckdb
import pyarrow as pa
from support.analysis_case import at, insert, new_case, timed_request

from forensics.analysis.stage import analyze
from forensics.casedb.sql import run_script, sql

RATE = 10_000  # normal prefill rate, tokens per second
SECOND = 1_000_000


def _unified(rid: str, account: str, received_s: float, cached: int | None) -> dict[str, Any]:
    """A 300-token request on unified node u1 (prefill and decode on one pool), normal time to
    first token for the tokens it computed."""
    computed = 300 - (cached or 0)
    row = timed_request(rid, account, received_s, 300, computed / RATE + 0.002)
    return row | {"prefill_node": None, "decode_node": None, "node": "u1", "cached_tokens": cached}


def _case(
    extra_facts: list[dict[str, Any]] | None = None, more: list[dict[str, Any]] | None = None
) -> duckdb.DuckDBPyConnection:
    """Eight normal requests of three accounts (100 s .. 170 s), then the stub S1 of acct-1 at
    200 s (299 of 300 tokens reported cached: cache-implausible), then:
    R1, R3 (acct-1) and R2 (acct-2) after it with whole-page hits, Z1 (acct-1) after it without a
    hit, U1 (acct-0) after it with cached_tokens not logged, E1 (acct-1) with a hit whose first
    token came before the stub arrived."""
    con = new_case()
    insert(
        con, "nodes", [{"node": "u1", "role": "unified", "pool_slots": 100_000, "page_size": 16}]
    )
    rows = [_unified(f"N{i:02d}", f"acct-{i % 3}", 100 + 10 * i, 0) for i in range(8)]
    rows += [
        _unified("E1", "acct-1", 190, 256),
        _unified("S1", "acct-1", 200, 299),
        _unified("R1", "acct-1", 300, 256),
        _unified("R2", "acct-2", 310, 256),
        _unified("Z1", "acct-1", 320, 0),
        _unified("U1", "acct-0", 330, None),
        _unified("R3", "acct-1", 340, 256),
        *(more or []),
    ]
    insert(con, "requests", rows)
    if extra_facts:
        insert(con, "node_facts", extra_facts)
    return con


def _pairs(con: duckdb.DuckDBPyConnection, basis: str | None = None) -> set[tuple[str, str]]:
    where = "" if basis is None else f"WHERE basis = '{basis}'"
    return set(
        con.execute(
            f"SELECT receiver_request_id, leaker_request_id FROM possible_exposures {where}"
        ).fetchall()
    )


def _receiving(con: duckdb.DuckDBPyConnection, side: str = "receiving") -> set[str]:
    return {
        r
        for (r,) in con.execute(
            "SELECT request_id FROM affected_requests WHERE side = ?", [side]
        ).fetchall()
    }


def test_a_later_request_of_the_stubs_account_with_a_hit_may_have_read_its_pages() -> None:
    """Every request of the stub's account on its node with a hit whose first token came after
    the stub arrived gets the stub's possible leakers; one without a hit or served before the
    stub does not. Every hit on the node is one its own account could have served, so another
    account's requests (R2 with a hit, U1 with none logged) are not candidates, and the
    leaking side is the stub's own."""
    con = _case()
    analyze(con)
    (reasons,) = con.execute("SELECT reasons FROM screening WHERE request_id = 'S1'").fetchone()
    assert reasons == ["cache-implausible"]
    stub = {leaker for receiver, leaker in _pairs(con) if receiver == "S1"}
    assert stub >= {f"N{i:02d}" for i in range(8)} | {"E1"}
    second = _pairs(con, "stub-cache-hit")
    assert {r for r, _ in second} == {"R1", "R3"}
    for receiver in ("R1", "R3"):
        assert {leaker for r, leaker in second if r == receiver} == stub - {receiver}
    receiving = _receiving(con)
    assert {"S1", "R1", "R3"} <= receiving and not receiving & {"Z1", "E1", "R2", "U1"}
    stub_leakers = {
        leaker for receiver, leaker in _pairs(con) if receiver == "S1" and leaker[0] == "N"
    }
    assert {"N01", "N04", "N07"} & _receiving(con, "leaking") == set()  # acct-1's own
    assert stub_leakers - {"N01", "N04", "N07"} <= _receiving(con, "leaking")


def test_where_the_log_shows_prompts_shared_across_accounts_any_account_may() -> None:
    """X1, the first request of acct-3 on the node, reports a 256-token hit that no request of
    its own account could have served: prompts begin alike across accounts there. Then R2
    (acct-2) and U1 (acct-0, cached_tokens not logged) may have hit the stub's blocks too, and
    acct-1's own earlier requests, foreign to R2, become possible leakers."""
    con = _case([], [_unified("X1", "acct-3", 180, 256)])
    analyze(con)
    assert {r for r, _ in _pairs(con, "stub-cache-hit")} == {"R1", "R2", "R3", "U1"}
    assert {"N01", "N04", "N07"} <= _receiving(con, "leaking")


def test_a_node_whose_log_says_prefix_caching_was_off_has_no_such_read() -> None:
    off = {
        "node": "u1",
        "fact": "prefix_caching",
        "value": "False",
        "run": 0,
        "source": "vllm.args",
    }
    con = _case([off])
    analyze(con)
    assert not _pairs(con, "stub-cache-hit")
    assert {r for r, _ in _pairs(con)} == {"S1"}


def _put(con: duckdb.DuckDBPyConnection, table: str, rows: list[dict[str, Any]]) -> None:
    con.register("_rows", pa.Table.from_pylist(rows))
    con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM _rows")
    con.unregister("_rows")


def _rebuilt(con: duckdb.DuckDBPyConnection, followed: bool) -> None:
    """The node as a consistent vLLM rebuild left it: the stub read N04; R1's hit was served
    from the stub's blocks (it read N04 too); the others' hits were served from nothing of the
    stub's."""
    run_script(con, sql("schema/reconstruct"))
    _put(
        con,
        "reconstructed_nodes",
        [
            {
                "node": "u1",
                "role": "unified",
                "allocator": "vllm",
                "page_size": 16,
                "pool_slots": 100_000,
                "requests": 15,
                "stubs": 1,
                "ambiguous_groups": 0,
                "orders": 2,
                "deferred": 0,
                "consistent": True,
            }
        ],
    )
    ids = [f"N{i:02d}" for i in range(8)] + ["E1", "S1", "R1", "R2", "Z1", "U1", "R3"]
    _put(
        con,
        "reconstructed_requests",
        [
            {
                "request_id": rid,
                "node": "u1",
                "stub": rid == "S1",
                "reasons": ["cache-implausible"] if rid == "S1" else [],
                "hits_followed": followed and rid != "S1",
            }
            for rid in ids
        ],
    )
    _put(
        con,
        "reconstructed_exposures",
        [
            {
                "receiver_request_id": receiver,
                "receiver_account_id": "acct-1",
                "leaker_request_id": "N04",
                "leaker_account_id": "acct-1",
                "node": "u1",
                "tokens": 16,
                "support": 1.0,
                "read_at": at(200 * SECOND),
                "cross_account": False,
            }
            for receiver in ("S1", "R1")
        ],
    )


def test_on_a_rebuilt_node_the_runs_that_followed_a_hit_decide_its_pairs() -> None:
    """On a consistent vLLM rebuild the stub keeps only N04, the leaker the runs found. Where
    every run followed a request's hit its pairs are the runs': R1 keeps N04, R3 (whose hit
    the runs served from nothing of the stub's) is cleared of it."""
    con = _case()
    _rebuilt(con, followed=True)
    analyze(con)
    assert {p for p in _pairs(con) if p[0] == "S1"} == {("S1", "N04")}
    assert _pairs(con, "stub-cache-hit") == {("R1", "N04")}
    cleared = con.execute(
        "SELECT receiver_request_id, leaker_request_id, evidence FROM cleared_findings "
        "WHERE receiver_request_id IN ('R1', 'R3')"
    ).fetchall()
    assert cleared == [("R3", "N04", "reconstruction")]


def test_a_rebuilt_node_whose_runs_stopped_early_keeps_the_stubs_leakers() -> None:
    """Runs that stopped at the stubs' first reads followed no later hit: R1 and R3 keep every
    leaker the stub kept, and the account rule still holds."""
    con = _case()
    _rebuilt(con, followed=False)
    analyze(con)
    assert _pairs(con, "stub-cache-hit") == {("R1", "N04"), ("R3", "N04")}
