"""A stub's blocks read a second time through the prefix cache, on a real vLLM: under the
batched load (tests/support/vllm_run.py `batched-cache-hit`), the stub is the first request of a
new account and that account's next request shares its 128-token prefix. The stub's blocks are
cached under the prefix's hashes though it wrote none of its prompt, and the next request is
served them. The truth is the analysis of the tapped ledger; then the ledger, the contents and
the tap's reports are withheld, and the lists are made by screening alone and by `kvforensics
reconstruct` then `analyze`. Needs the engines' environment."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from support.vllm_serve import db_rows as _rows
from support.vllm_serve import serve_case as _serve

from forensics.cli import run as cli

STUB_AT = 14
HIT = f"hit-{STUB_AT + 1}"


def _listed(db: Path, unit: str) -> set[tuple[str, str]]:
    return set(_rows(db, f"SELECT side, {unit} FROM affected_{unit.split('_')[0]}s"))


@pytest.fixture(scope="module")
def served(engine: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:  # noqa: F811
    base = tmp_path_factory.mktemp("cache-hit")
    env = {"VLLM_RUN_SEED": "41", "BATCHED_STUB_AT": str(STUB_AT)}
    run = _serve(engine, "batched-cache-hit", base, env, keep_log=True)
    case = base / "withheld"
    shutil.copytree(
        run["case"], case, ignore=shutil.ignore_patterns("kv_events", "contents", "tap")
    )
    screened, rebuilt = base / "screened.duckdb", base / "rebuilt.duckdb"
    assert cli(["ingest", str(case), "--db", str(screened)]) == 0
    shutil.copy(screened, rebuilt)
    cli(["analyze", "--db", str(screened)])
    assert cli(["reconstruct", "--db", str(rebuilt)]) in (0, 1)
    cli(["analyze", "--db", str(rebuilt)])
    return {**run, "screened": screened, "rebuilt": rebuilt}


def test_the_ledger_shows_the_second_request_reading_another_accounts_data(
    served: dict[str, Any],
) -> None:
    """The case does what it says: in the tapped ledger, the request served the stub's blocks
    read data of another account, with the 128 cached tokens its usage reports."""
    truth = _listed(served["db"], "request_id")
    assert ("receiving", HIT) in truth and ("receiving", f"stub-{STUB_AT}") in truth
    ((cached,),) = _rows(
        served["db"], f"SELECT cached_tokens FROM requests WHERE request_id = '{HIT}'"
    )
    assert cached == 128


@pytest.mark.parametrize("method", ["screened", "rebuilt"])
def test_every_true_party_is_listed(served: dict[str, Any], method: str) -> None:
    for unit in ("request_id", "account_id"):
        truth, listed = _listed(served["db"], unit), _listed(served[method], unit)
        assert truth <= listed, (unit, truth - listed)


def test_the_second_read_is_listed_with_the_stubs_leakers_only(served: dict[str, Any]) -> None:
    """The request served the stub's blocks gets the stub's possible leakers, and the leaking
    side gains nobody the stub's own pairs do not name (prompts are not shared across accounts
    here, and the log shows none)."""
    for method in ("screened", "rebuilt"):
        pairs = _rows(
            served[method],
            "SELECT receiver_request_id, leaker_request_id, basis FROM possible_exposures "
            "WHERE cross_account",
        )
        stub = {leaker for r, leaker, _ in pairs if r == f"stub-{STUB_AT}"}
        second = {leaker for r, leaker, basis in pairs if r == HIT and basis == "stub-cache-hit"}
        assert second and second <= stub, method
        receivers = {r for r, _, basis in pairs if basis == "stub-cache-hit"}
        assert {a for (a,) in _rows(
            served[method],
            "SELECT DISTINCT account_id FROM requests WHERE request_id IN "
            f"({', '.join(repr(r) for r in receivers)})",
        )} == {"acct-new"}  # fmt: skip


def test_the_rebuild_finds_the_second_read_as_the_ledger_shows_it(served: dict[str, Any]) -> None:
    """vLLM's scheduler, driven over the rebuilt steps, serves the second request the stub's
    blocks too: both lists are the ledger's, and the second request read as many tokens of
    each leaker as the ledger says (the load arrives by engine steps, so the engine's run is
    the same on every machine). A loaded machine can log outputs of one step apart, and steps
    so close are also run merged (steps.doubtful): then the ledger's run is one of those kept,
    and the lists hold the ledger's parties with at least its token counts."""
    query = "SELECT side, request_id, tokens FROM affected_requests ORDER BY ALL"
    truth, rebuilt = _rows(served["db"], query), _rows(served["rebuilt"], query)
    pairs = "SELECT receiver_request_id, leaker_request_id, tokens FROM {} WHERE cross_account"
    found = set(_rows(served["rebuilt"], pairs.format("reconstructed_exposures")))
    ledger = set(_rows(served["db"], pairs.format("exposure_tokens")))
    ((variants,),) = _rows(served["rebuilt"], "SELECT variants FROM reconstructed_nodes")
    if "logged apart" not in variants:
        assert truth == rebuilt
        assert {p for p in found if p[0] == HIT} == {p for p in ledger if p[0] == HIT}
        return
    most = {(side, rid): tokens for side, rid, tokens in rebuilt}
    assert all(most.get((side, rid), -1) >= tokens for side, rid, tokens in truth), rebuilt
    assert {p[:2] for p in ledger if p[0] == HIT} <= {p[:2] for p in found if p[0] == HIT}
