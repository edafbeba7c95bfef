"""The case database explains itself: comments on every table and column, working tables in
their own schema, views for the common questions, one row per node, UTC instants and no
HUGEINT. Checked on the sample incident as ingest and analyze leave it."""

from __future__ import annotations

import csv

import duckdb
import pytest
from support.paths import REPO, SAMPLE

from forensics.cli import run


@pytest.fixture(scope="module")
def con(tmp_path_factory: pytest.TempPathFactory) -> duckdb.DuckDBPyConnection:
    db = tmp_path_factory.mktemp("schema") / "case.duckdb"
    assert run(["ingest", str(SAMPLE), "--db", str(db)]) in (0, 1)
    assert run(["analyze", "--db", str(db)]) == 1
    connection = duckdb.connect(str(db), read_only=True)
    yield connection
    connection.close()


def _all(con: duckdb.DuckDBPyConnection, text: str) -> list[tuple]:
    return con.execute(text).fetchall()


def test_every_table_and_column_has_a_comment(con: duckdb.DuckDBPyConnection) -> None:
    tables = _all(
        con,
        "SELECT schema_name, table_name, comment FROM duckdb_tables() "
        "WHERE NOT temporary ORDER BY ALL",
    )
    assert len(tables) >= 25
    assert [(s, t) for s, t, c in tables if not c] == []
    columns = _all(
        con,
        "SELECT schema_name, table_name, column_name, comment "
        "FROM duckdb_columns() WHERE NOT internal AND schema_name <> 'temp' "
        "AND table_name IN (SELECT table_name FROM duckdb_tables()) ORDER BY ALL",
    )
    assert len(columns) >= 200
    assert [(s, t, c) for s, t, c, text in columns if not text] == []
    comment = dict(((t, c), text) for _, t, c, text in columns)
    assert comment[("nodes", "pool_slots")] == "KV pool size in token slots"
    views = _all(
        con,
        "SELECT view_name, comment FROM duckdb_views() WHERE NOT internal "
        "AND schema_name = 'main' ORDER BY 1",
    )
    assert [v for v, _ in views] == [
        "account_exposure",
        "account_pair_exposure",
        "node_capacity",
        "request_evidence",
    ]
    assert all(text for _, text in views)


def test_working_tables_apart_from_results(con: duckdb.DuckDBPyConnection) -> None:
    by_schema = _all(
        con,
        "SELECT schema_name, list(table_name ORDER BY table_name) "
        "FROM duckdb_tables() GROUP BY 1 ORDER BY 1",
    )
    schemas = dict(by_schema)
    assert set(schemas) == {"main", "work"}
    assert all(name.startswith("analysis_") for name in schemas["work"])
    assert "analysis_request_codes" in schemas["work"]
    # the sweep's pieces live only while the analysis runs
    assert not [name for name in schemas["work"] if "pieces" in name or "piece_events" in name]
    assert not [name for name in schemas["main"] if name.startswith("analysis_")]
    assert {"exposures", "affected_accounts", "exposure_tokens"} <= set(schemas["main"])


def test_joins_with_nodes_never_multiply(con: duckdb.DuckDBPyConnection) -> None:
    nodes, distinct = _all(con, "SELECT count(*), count(DISTINCT node) FROM nodes")[0]
    assert nodes == distinct > 0
    # the sample's nodes are in nodes.csv and in the logs: the logged starts have their own table
    assert _all(con, "SELECT count(*) FROM node_starts")[0][0] >= distinct
    joined = _all(con, "SELECT count(*) FROM requests r JOIN nodes n ON n.node = r.prefill_node")
    listed = {n for (n,) in _all(con, "SELECT node FROM nodes")}
    served = [p for (p,) in _all(con, "SELECT prefill_node FROM requests")]
    assert joined[0][0] == sum(1 for p in served if p in listed) > 0
    assert _all(con, "SELECT count(*) FROM request_evidence") == _all(
        con, "SELECT count(*) FROM exposures"
    )
    assert _all(con, "SELECT count(*) FROM node_capacity")[0][0] == nodes


def test_views_agree_with_the_tables(con: duckdb.DuckDBPyConnection) -> None:
    pairs = _all(
        con,
        "SELECT sum(tokens), sum(tokens) FILTER (WHERE cross_account) FROM account_pair_exposure",
    )[0]
    assert (
        pairs
        == _all(
            con, "SELECT sum(tokens), sum(tokens) FILTER (WHERE cross_account) FROM exposure_tokens"
        )[0]
    )
    # cross-account tokens per receiving account equal the analysis' affected_accounts
    per_account = dict(
        _all(
            con,
            "SELECT receiver_account_id, sum(tokens) FROM "
            "account_pair_exposure WHERE cross_account GROUP BY 1",
        )
    )
    assert per_account == dict(
        _all(
            con,
            "SELECT account_id, tokens FROM affected_accounts "
            "WHERE side = 'receiving' AND tokens IS NOT NULL",
        )
    )


def test_instants_and_integer_types(con: duckdb.DuckDBPyConnection) -> None:
    types = _all(
        con,
        "SELECT table_name, column_name, data_type FROM duckdb_columns() "
        "WHERE schema_name IN ('main', 'work') ORDER BY ALL",
    )
    naive = [(t, c) for t, c, kind in types if kind == "TIMESTAMP"]
    assert naive == []
    assert [(t, c) for t, c, kind in types if kind == "HUGEINT"] == []
    assert ("exposures", "first_read_at", "TIMESTAMP WITH TIME ZONE") in types


def test_account_counts_do_not_multiply(con: duckdb.DuckDBPyConnection) -> None:
    """account_pair_exposure counts each pair's requests once, and account_exposure each
    account's, against a naive count of the ground truth's exposure runs (the sample's
    acct-0002 has 2 receiving requests that read KV of 5 accounts: summing its pairs gives 8)."""
    truth = list(csv.DictReader((REPO / "data_samples/incident/ground_truth/exposures.csv").open()))
    pairs: dict[tuple[str, str], tuple[set[str], set[str]]] = {}
    per_account: dict[tuple[str, str, bool], set[str]] = {}
    for e in truth:
        cross = e["cross_account"] == "true"
        got = pairs.setdefault((e["receiver_account_id"], e["leaker_account_id"]), (set(), set()))
        got[0].add(e["receiver_request_id"])
        got[1].add(e["leaker_request_id"])
        key = ("receiving", e["receiver_account_id"], cross)
        per_account.setdefault(key, set()).add(e["receiver_request_id"])
        key = ("leaking", e["leaker_account_id"], cross)
        per_account.setdefault(key, set()).add(e["leaker_request_id"])
    shown = _all(
        con,
        "SELECT receiver_account_id, leaker_account_id, receiving_requests, leaking_requests "
        "FROM account_pair_exposure",
    )
    assert {(r, w): (n, m) for r, w, n, m in shown} == {
        k: (len(a), len(b)) for k, (a, b) in pairs.items()
    }
    accounts = _all(con, "SELECT side, account_id, cross_account, requests FROM account_exposure")
    assert {(s, a, c): n for s, a, c, n in accounts} == {k: len(v) for k, v in per_account.items()}
    assert len(per_account[("receiving", "acct-0002", True)]) == 2
