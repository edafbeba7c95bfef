"""Requests that may have read a stub's pages through the prefix cache (queries/analysis/
possible_cache_hits.sql): an engine that takes a stub's prompt as computed caches the blocks it
handed the stub under that prompt's hashes, and a later request whose prompt begins alike is
served them and reads what their earlier owners left. Each case's answer follows from that
rule by hand."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
from support.analysis_case import at, insert, new_case, timed_request

from forensics.analysis.stage import analyze
from forensics.casedb.sql import run_script, sql
from forensics.options import AnalysisOptions, ScreeningParams
from forensics.report.explain import explain_one, render_page
from forensics.report.stage import write_all

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


def _rebuilt(con: duckdb.DuckDBPyConnection) -> None:
    """The node as a consistent vLLM rebuild left it: the stub read N05 (acct-2), and one run
    served R1's hit from the stub's blocks (R1 read N05 too)."""
    run_script(con, sql("schema/reconstruct"))
    _put(
        con,
        "reconstructed_nodes",
        [
            {
                "node": "u1", "role": "unified", "allocator": "vllm", "page_size": 16,
                "pool_slots": 100_000, "requests": 15, "stubs": 1, "ambiguous_groups": 0,
                "orders": 2, "deferred": 0, "consistent": True,
            }
        ],
    )  # fmt: skip
    ids = [f"N{i:02d}" for i in range(8)] + ["E1", "S1", "R1", "R2", "Z1", "U1", "R3"]
    _put(
        con,
        "reconstructed_requests",
        [
            {
                "request_id": rid, "node": "u1", "stub": rid == "S1",
                "reasons": ["cache-implausible"] if rid == "S1" else [],
            }
            for rid in ids
        ],
    )  # fmt: skip
    _put(
        con,
        "reconstructed_exposures",
        [
            {
                "receiver_request_id": receiver, "receiver_account_id": "acct-1",
                "leaker_request_id": "N05", "leaker_account_id": "acct-2", "node": "u1",
                "tokens": 16, "support": support, "read_at": at(200 * SECOND),
                "cross_account": True,
            }
            for receiver, support in (("S1", 1.0), ("R1", 0.5))
        ],
    )  # fmt: skip


def test_a_rebuild_lists_the_reads_its_runs_found_and_clears_none() -> None:
    """On a consistent vLLM rebuild the stub keeps only N05, the leaker its runs found, and R1
    and R3 inherit it. R1, whose read a run found, is listed as reconstructed; R3, whose read no
    run made, stays possible: the rebuild gives each account one prefix, and a second one
    (which the stub's prompt may have begun) would serve the hits elsewhere in the model than
    in the engine, so it clears no such read. R2 is of another account, as before."""
    con = _case()
    _rebuilt(con)
    analyze(con)
    assert {p for p in _pairs(con) if p[0] == "S1"} == {("S1", "N05")}
    assert _pairs(con, "stub-cache-hit") == {("R1", "N05"), ("R3", "N05")}
    confidence = dict(
        con.execute(
            "SELECT request_id, confidence FROM affected_requests WHERE side = 'receiving'"
        ).fetchall()
    )
    assert confidence == {"S1": "reconstructed", "R1": "reconstructed", "R3": "possible"}
    cleared = con.execute(
        "SELECT count(*) FROM cleared_findings WHERE receiver_request_id IN ('R1', 'R3')"
    ).fetchone()
    assert cleared == (0,)


def test_explain_says_what_a_stub_cache_hit_pair_means_on_each_side() -> None:
    """The explain page names the basis in words: for R1, that its hit may have been served
    the stub's blocks; for N02 (acct-2, a leaker of the stub), that a later request may have
    been served a stub's blocks holding its data; for Z1 (which no such pair names), nothing."""
    con = _case()
    analyze(con)
    page = {rid: render_page(explain_one(con, rid)) for rid in ("R1", "N02", "Z1")}
    assert "may have been served from blocks a stub was handed" in page["R1"]
    assert "a later request may have been served a stub" in page["N02"]
    assert "stub-cache-hit:" not in page["Z1"]


def test_a_stub_whose_row_names_no_node_may_have_been_read_again_on_any() -> None:
    """The same log naming no node, beside two engines (so none is inferred): the stub may
    have been on either, and its account's later requests with a hit (R1, R3) get its possible
    leakers, on whichever node; without a hit (Z1) or served before it (E1) they do not."""
    con = _case()
    con.execute("UPDATE requests SET node = NULL")
    insert(con, "nodes", [{"node": "u2", "role": "unified", "pool_slots": 100_000}])
    analyze(con)
    (node,) = con.execute("SELECT decode_node FROM screening WHERE request_id = 'S1'").fetchone()
    assert node is None
    second = _pairs(con, "stub-cache-hit")
    assert {r for r, _ in second} == {"R1", "R3"}
    stub = {leaker for receiver, leaker in _pairs(con) if receiver == "S1"}
    for receiver in ("R1", "R3"):
        assert {leaker for r, leaker in second if r == receiver} == stub - {receiver}
    assert {"S1", "R1", "R3"} <= _receiving(con)


def _report(con: duckdb.DuckDBPyConnection, out: Path) -> str:
    write_all(con, out)
    return (out / "report.html").read_text(encoding="utf-8")


def _lists(con: duckdb.DuckDBPyConnection) -> set[tuple[str, str]]:
    return set(con.execute("SELECT side, request_id FROM affected_requests").fetchall()) | set(
        con.execute("SELECT side, account_id FROM affected_accounts").fetchall()
    )


def test_too_many_second_read_pairs_are_condensed_to_what_the_lists_need(
    monkeypatch, tmp_path
) -> None:
    """Prompts shared across accounts: every later hit may have read the stub's blocks, and
    its pairs with every leaker of the stub grow as hits times leakers. Over the budget, each
    second reader keeps one pair with a leaker foreign to it and each leaker of the stub's own
    account one with a foreign second reader: the same requests and accounts are listed on
    both sides, with far fewer pairs, and the analyze line says the counts are not full."""
    more = [_unified("X1", "acct-3", 180, 256)]
    full = _case([], more)
    analyze(full)
    full_pairs = _pairs(full, "stub-cache-hit")
    monkeypatch.setattr(
        AnalysisOptions, "screening", lambda _self: ScreeningParams(second_read_pairs=1)
    )
    condensed = _case([], more)
    summary = analyze(condensed)
    kept = _pairs(condensed, "stub-cache-hit-condensed")
    assert not _pairs(condensed, "stub-cache-hit") and kept < full_pairs
    assert {r for r, _ in kept} == {r for r, _ in full_pairs} == {"R1", "R2", "R3", "U1"}
    assert _lists(condensed) == _lists(full)
    assert summary["figures"]["condensed_second_reads"] == 4
    assert "are listed with one counterpart each" in str(summary["headline"])
    page = render_page(explain_one(condensed, "R2"))
    assert "may have been served from blocks a stub was handed" in page
    assert "too many on this node to pair one by one" in page
    report = _report(condensed, tmp_path / "out")
    assert re.search(r'data-evidence="condensed">For <strong>4</strong>', report)
    assert 'data-evidence="condensed"' not in _report(full, tmp_path / "full")
