"""A request log that names no node, beside a case that knows exactly one engine node (a gateway
in front of one engine, which has no node to log): the requests are taken as that node's, so
that screening and reconstruction can place them, and the headline says so. Where the case
knows two nodes, or the one it knows is a prefill or decode half, or a ledger is loaded, nothing
is inferred and the suspects stay unplaced."""

from __future__ import annotations

from typing import Any

import duckdb
import pytest
from support.analysis_case import insert, insert_ledger, new_case, timed_request

from forensics.analysis.stage import analyze

UNPLACED = {"prefill_node": None, "decode_node": None}


def _rows() -> list[dict[str, Any]]:
    """Four earlier requests of two accounts, then a stub of a third: over the pool, and served
    from a cache larger than anything before it held (so flagged also where no pool is known)."""
    rows = [
        timed_request(f"N{i}", f"acct-{i % 2}", 100 + i, 300, 0.03, **UNPLACED) for i in range(4)
    ]
    return [*rows, timed_request("S1", "acct-9", 200, 5000, 0.002, cached_tokens=4999, **UNPLACED)]


def _case(nodes: list[dict[str, Any]]) -> duckdb.DuckDBPyConnection:
    con = new_case()
    insert(con, "nodes", nodes)
    insert(con, "requests", _rows())
    return con


def _placed(con: duckdb.DuckDBPyConnection) -> dict[str, tuple[str | None, str | None]]:
    rows = con.execute("SELECT request_id, prefill_node, decode_node FROM screening").fetchall()
    return {r: (p, d) for r, p, d in rows}


def test_the_only_engine_node_serves_the_requests_the_log_does_not_place() -> None:
    con = _case([{"node": "vllm-0", "role": "unified", "pool_slots": 1000}])
    summary = analyze(con)
    assert set(_placed(con).values()) == {("vllm-0", "vllm-0")}
    reasons = con.execute("SELECT reasons FROM screening WHERE request_id = 'S1'").fetchone()
    assert reasons is not None and "over-pool" in reasons[0]  # the node's pool now judges it
    nodes = {r[0] for r in con.execute("SELECT DISTINCT node FROM possible_exposures").fetchall()}
    assert nodes == {"vllm-0"}
    figures = summary["figures"]
    assert figures["sole_node_requests"] == 5 and figures["nodeless_suspects"] == 0
    assert "5 requests name no node in the request log and are taken as served" in str(
        summary["headline"]
    )
    # every earlier request is still a possible source: nothing was lost by placing them
    leakers = con.execute(
        "SELECT leaker_request_id FROM possible_exposures WHERE receiver_request_id = 'S1'"
    ).fetchall()
    assert sorted(r[0] for r in leakers) == ["N0", "N1", "N2", "N3"]


def test_a_node_named_only_by_the_log_is_the_only_one_too() -> None:
    """No nodes file, but some rows name the one node: the others are taken as its own."""
    con = new_case()
    rows = _rows()
    rows[0] |= {"node": "vllm-0"}
    insert(con, "requests", rows)
    analyze(con)
    assert set(_placed(con).values()) == {("vllm-0", "vllm-0")}


@pytest.mark.parametrize(
    "nodes",
    [
        [  # two engines: which served a request the log does not say
            {"node": "vllm-0", "role": "unified", "pool_slots": 1000},
            {"node": "vllm-1", "role": "unified", "pool_slots": 1000},
        ],
        # one half of a disaggregated pair: its other half is not in the case
        [{"node": "p1", "role": "prefill", "pool_slots": 1000}],
        [],  # no node known at all
    ],
    ids=["two-nodes", "a-prefill-half", "none"],
)
def test_nothing_is_inferred_unless_exactly_one_whole_engine_is_known(
    nodes: list[dict[str, Any]],
) -> None:
    con = _case(nodes)
    summary = analyze(con)
    assert set(_placed(con).values()) == {(None, None)}
    assert summary["figures"]["sole_node_requests"] == 0
    assert summary["figures"]["nodeless_suspects"] == 1


def test_a_loaded_ledger_names_its_requests_nodes_itself() -> None:
    con = _case([{"node": "vllm-0", "role": "unified", "pool_slots": 1000}])
    ledger = [
        {
            "ts": 100_000_000 + i,
            "seq": i,
            "node": "vllm-0",
            "request_id": "N0",
            "op": op,
            "slot_start": 0,
            "slot_count": 32,
            "input_order": i,
        }
        for i, op in enumerate(("alloc", "write"))
    ]
    insert_ledger(con, ledger)
    summary = analyze(con)
    assert summary["figures"]["sole_node_requests"] == 0
    assert _placed(con)["S1"] == (None, None)
