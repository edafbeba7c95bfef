"""Reconstruction on a real vLLM's unified node, without its ledger: the stub fault under
batched load (tests/support/vllm_run.py `batched`, sampled outputs, 24 requests of 4 accounts with
shared prefixes, several in flight, a pool of 40 blocks), served with the tap on. The truth is
the analysis of the tapped ledger; then the ledger, the contents and the tap's reports are
withheld and `kvforensics reconstruct` (vLLM's own KV cache manager, prefix caching on, in the
engines' environment) then `analyze` run on what is left. Needs the engines' environment."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from support.vllm_serve import db_rows as _rows
from support.vllm_serve import serve_case as _serve

from forensics.cli import run as cli

TAP = {"VLLM_RUN_SAMPLING": "sampled", "VLLM_RUN_SEED": "17", "BATCHED_STUB_AT": "21"}


@pytest.fixture(scope="module")
def rebuilt(engine: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:  # noqa: F811
    base = tmp_path_factory.mktemp("batched")
    run = _serve(engine, "batched", base, TAP)
    case = base / "withheld"
    shutil.copytree(
        run["case"], case, ignore=shutil.ignore_patterns("kv_events", "contents", "tap")
    )
    db = base / "withheld.duckdb"
    assert cli(["ingest", str(case), "--db", str(db)]) == 0
    assert cli(["reconstruct", "--db", str(db)]) in (0, 1)
    cli(["analyze", "--db", str(db)])
    return {**run, "withheld": db}


def _affected(db: Path, unit: str) -> set[tuple[str, str]]:
    return set(_rows(db, f"SELECT side, {unit} FROM affected_{unit.split('_')[0]}s"))


def test_every_true_party_is_listed(rebuilt: dict[str, Any]) -> None:
    truth_db, db = rebuilt["db"], rebuilt["withheld"]
    for unit in ("request_id", "account_id"):
        truth, listed = _affected(truth_db, unit), _affected(db, unit)
        assert {s for s, _ in truth} == {"receiving", "leaking"}
        assert truth <= listed, (unit, truth - listed)


def test_the_node_was_rebuilt_on_vllms_manager_consistently(rebuilt: dict[str, Any]) -> None:
    rows = _rows(
        rebuilt["withheld"],
        "SELECT role, allocator, allocator_version, consistent, variants FROM reconstructed_nodes",
    )
    assert len(rows) == 1
    role, allocator, version, consistent, variants = rows[0]
    assert (role, allocator, consistent) == ("unified", "vllm", True), variants
    assert version and version.startswith("0.")


def test_cleared_pairs_are_true_negatives_and_one_crosses_accounts(
    rebuilt: dict[str, Any],
) -> None:
    """Every cleared pair is one the tapped ledger does not have, and reconstruction cleared
    at least one cross-account candidate that did not leak."""
    pairs = "SELECT receiver_request_id, leaker_request_id FROM "
    true = set(_rows(rebuilt["db"], pairs + "exposure_tokens"))
    cleared = _rows(
        rebuilt["withheld"],
        pairs.replace("FROM", ", receiver_account_id <> leaker_account_id FROM")
        + "cleared_findings WHERE evidence = 'reconstruction'",
    )
    assert not {(r, w) for r, w, _ in cleared} & true
    assert any(cross for _, _, cross in cleared)
