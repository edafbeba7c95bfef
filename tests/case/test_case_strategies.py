"""The shared hypothesis strategies (tests/support/strategies.py) make cases the input contract
accepts: every row has only the contract's columns, its required ones filled and its ops the
contract's; written as a case folder, it ingests with nothing quarantined and every row loaded.
A strategy that drifted from the contract would make the property tests that use it test
quarantine instead of the analysis."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from support.cases import query, write_case
from support.strategies import OPS, case_files, case_tables

from forensics.case.contract import BY_NAME
from forensics.case.contract import OPS as CONTRACT_OPS
from forensics.cli import run


def _contract_errors(table: str, rows: list[dict[str, Any]]) -> list[str]:
    contract = BY_NAME[table]
    errors = [
        f"{table}: column {c} not in the contract"
        for r in rows
        for c in r
        if c not in contract.names
    ]
    errors += [f"{table}: {c} missing" for r in rows for c in contract.required if r.get(c) is None]
    return errors


def test_the_ledger_strategies_use_the_contracts_ops() -> None:
    assert set(OPS) == set(CONTRACT_OPS)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case_tables())
def test_generated_cases_ingest_with_nothing_quarantined(tables: dict[str, list[dict]]) -> None:
    assert _contract_errors("requests", tables["requests"]) == []
    assert _contract_errors("kv_events", tables["kv_events"]) == []
    assert {r["op"] for r in tables["kv_events"]} <= set(CONTRACT_OPS)
    with tempfile.TemporaryDirectory() as tmp:
        case = write_case(Path(tmp) / "case", case_files(tables))
        db = Path(tmp) / "case.duckdb"
        assert run(["ingest", str(case), "--db", str(db)]) == 0
        assert query(db, "SELECT table_name, reason FROM quarantine") == []
        assert query(db, "SELECT count(*) FROM requests") == [(len(tables["requests"]),)]
        assert query(db, "SELECT count(*) FROM kv_events") == [(len(tables["kv_events"]),)]
        assert query(db, "SELECT count(*) FROM kv_events WHERE NOT request_known") == [(0,)]
