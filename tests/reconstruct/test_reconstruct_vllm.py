"""Reconstruction on a real vLLM's unified node, without its ledger: the stub fault under
batched load (tests/support/vllm_run.py `batched`, sampled outputs, 24 requests of 4 accounts with
shared prefixes, several in flight, a pool of 40 blocks), served with the tap on. The truth is
the analysis of the tapped ledger; then the ledger, the contents and the tap's reports are
withheld and `kvforensics reconstruct` (vLLM's own v1 scheduler, prefix caching as logged, in the
engines' environment) then `analyze` run on what is left; once as served, once under
scheduling limits that bind, named in the engine's log, and once through vLLM's own
OpenAI-compatible server with a gateway's HTTP client (tests/support/vllm_http_run.py), whose
log carries each output milliseconds after its step with a delay of its own. Needs the
engines' environment."""

from __future__ import annotations

import csv
import datetime as dt
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import pytest
from support.vllm_serve import db_rows as _rows
from support.vllm_serve import needed_jitter_us
from support.vllm_serve import serve_case as _serve

from forensics.cli import run as cli
from forensics.reconstruct.delivery import measure_delivery
from forensics.reconstruct.limits import NO_LIMITS
from forensics.reconstruct.stage import ASSUMED_PAGE_SIZE

# The stub at request 21 under batched load, outputs sampled; then the same greedy (vLLM's CPU
# build cannot rewind a seeded generator over a chunked prefill) under scheduling limits that
# bind: 4 seats for up to 6 requests in flight and a budget of 64 tokens per step, so prompts
# of 136 to 200 tokens are chunked; the engine's log, which names the limits, is kept.
# Through the server, the delivery jitter is stated as what the engine's steps needed, plus:
JITTER_MARGIN_US = 500
CASES = {
    "default": {"VLLM_RUN_SAMPLING": "sampled", "VLLM_RUN_SEED": "17", "BATCHED_STUB_AT": "21"},
    "limits": {
        "VLLM_RUN_SEED": "8",
        "BATCHED_STUB_AT": "21",
        "VLLM_RUN_MAX_SEQS": "4",
        "VLLM_RUN_MAX_BATCHED": "64",
    },
    "http": {"VLLM_RUN_SEED": "31", "BATCHED_STUB_AT": "21"},
    # the engine started without prefix caching (its log, which says so, kept): every
    # response reports 0 cached tokens and freed blocks are reused in another order
    "nocache": {"VLLM_RUN_SEED": "7", "BATCHED_STUB_AT": "21", "VLLM_RUN_PREFIX_CACHING": "0"},
}


# Sent at the wall clock, the requests can meet the engine at other moments on a loaded
# machine, and the stub can be given blocks no request wrote (seen once through the server, in
# a fresh-clone run of the whole suite): that run has nothing to find, and the next seed is
# served, up to SERVES times in all.
SERVES = 3


def _leaking_run(engine: dict[str, Any], base: Path, name: str) -> dict[str, Any]:
    """A served run of the case whose tapped ledger shows the stub reading another account's
    data (both sides to notify)."""
    env = dict(CASES[name])
    for k in range(SERVES):
        where = base / f"serve-{k}"
        where.mkdir()
        keep_log = name != "http"  # the server's run keeps its own
        run = _serve(engine, "batched", where, env, keep_log=keep_log, http=name == "http")
        if {s for s, _ in _affected(run["db"], "request_id")} == {"receiving", "leaking"}:
            return run
        env["VLLM_RUN_SEED"] = str(int(env["VLLM_RUN_SEED"]) + 1)
    pytest.fail(f"{SERVES} serves of the {name} case gave the stub no other account's data")


@pytest.fixture(scope="module", params=sorted(CASES))
def rebuilt(
    engine: dict[str, Any],  # noqa: F811
    tmp_path_factory: pytest.TempPathFactory,
    request: pytest.FixtureRequest,
) -> dict[str, Any]:
    base = tmp_path_factory.mktemp(f"batched-{request.param}")
    limits, http = request.param == "limits", request.param == "http"
    run = _leaking_run(engine, base, request.param)
    case = base / "withheld"
    shutil.copytree(
        run["case"], case, ignore=shutil.ignore_patterns("kv_events", "contents", "tap")
    )
    db = base / "withheld.duckdb"
    assert cli(["ingest", str(case), "--db", str(db)]) == 0
    stated = base / "stated.duckdb"
    shutil.copy(db, stated)
    assert cli(["reconstruct", "--db", str(db)]) in (0, 1)
    cli(["analyze", "--db", str(db)])
    out = {**run, "withheld": db, "limits": limits, "http": http}
    out["nocache"] = request.param == "nocache"
    if limits:  # again, with the engine's log (the only source of its limits) withheld too
        unlogged = base / "unlogged"
        shutil.copytree(case, unlogged, ignore=shutil.ignore_patterns("logs"))
        out["unlogged"] = _analysed(unlogged)
        for name, drop in BLOCK_SIZE_LINES.items():  # the block size named nowhere else
            out[name] = _without_block_size(case, base / name, drop)
    if request.param == "default":  # again, the gateway's log naming no node (one engine)
        out["nodeless"] = _without_node_column(case, base / "nodeless")
        out["two_engines"] = _two_engines_one_log(case, base / "two-engines")
    if http:  # again, under the jitter the engine's own steps needed (from the tapped ledger)
        jitter = (needed_jitter_us(run["db"]) + JITTER_MARGIN_US) / 1000
        assert cli(["reconstruct", "--db", str(stated), "--delivery-jitter-ms", str(jitter)]) in (
            0,
            1,
        )
        cli(["analyze", "--db", str(stated)])
        out |= {"stated": stated, "jitter_ms": jitter}
    return out


# The block size's sources taken away (with the tap's nodes file, which names it): the
# operator's `block_size` (then the pool's blocks from --num-gpu-blocks-override give it), then
# also that override line (then nothing does, and the 16 the log audit assumes is a guess).
BLOCK_SIZE_LINES = {
    "derived": ("'block_size': 32, ",),
    "assumed": ("'block_size': 32, ", "Overriding num_gpu_blocks="),
}


def _without_block_size(case: Path, where: Path, drop: tuple[str, ...]) -> Path:
    shutil.copytree(case, where, ignore=shutil.ignore_patterns("nodes"))
    for log in (where / "logs").iterdir():
        lines = log.read_text().splitlines(keepends=True)
        kept = [ln.replace(drop[0], "") for ln in lines if not any(d in ln for d in drop[1:])]
        log.write_text("".join(kept))
    return _analysed(where)


def _analysed(where: Path) -> Path:
    """The case folder ingested, rebuilt and analyzed beside it; its database."""
    db = where.with_suffix(".duckdb")
    assert cli(["ingest", str(where), "--db", str(db)]) == 0
    assert cli(["reconstruct", "--db", str(db)]) in (0, 1)
    cli(["analyze", "--db", str(db)])
    return db


def _requests_without_node(where: Path, more: Callable[[list[dict[str, str]]], list]) -> None:
    """The case's request log rewritten without its `node` column, with the rows `more` adds."""
    log = where / "requests.csv"
    with log.open(newline="") as f:
        rows = list(csv.DictReader(f))
    merged = sorted(rows + more(rows), key=lambda r: (r["received_at"], r["request_id"]))
    with log.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=[k for k in rows[0] if k != "node"])
        writer.writeheader()
        writer.writerows({k: v for k, v in r.items() if k != "node"} for r in merged)


def _without_node_column(case: Path, where: Path) -> Path:
    """The case with its request log's `node` column taken out, ingested, rebuilt, analyzed."""
    shutil.copytree(case, where)
    _requests_without_node(where, lambda _rows: [])
    return _analysed(where)


def _second_engine(rows: list[dict[str, str]]) -> list[dict[str, str]]:
    """The rows again 7 ms later under other request and account ids: a second engine's load."""
    later = dt.timedelta(milliseconds=7)
    times = ("received_at", "first_token_at", "completed_at")
    return [
        r
        | {"request_id": f"e2-{r['request_id']}", "account_id": f"e2-{r['account_id']}"}
        | {k: (dt.datetime.fromisoformat(r[k]) + later).isoformat() for k in times}
        for r in rows
    ]


def _two_engines_one_log(case: Path, where: Path) -> Path:
    """Two engines behind one gateway that logs no node, only the first engine's log kept (and
    no nodes file): ingested, rebuilt, analyzed."""
    shutil.copytree(case, where, ignore=shutil.ignore_patterns("nodes"))
    _requests_without_node(where, _second_engine)
    return _analysed(where)


def _affected(db: Path, unit: str) -> set[tuple[str, str]]:
    return set(_rows(db, f"SELECT side, {unit} FROM affected_{unit.split('_')[0]}s"))


def test_every_true_party_is_listed(rebuilt: dict[str, Any]) -> None:
    truth_db, db = rebuilt["db"], rebuilt["withheld"]
    for unit in ("request_id", "account_id"):
        truth, listed = _affected(truth_db, unit), _affected(db, unit)
        assert {s for s, _ in truth} == {"receiving", "leaking"}
        assert truth <= listed, (unit, truth - listed)


def _node(rebuilt: dict[str, Any]) -> tuple[Any, ...]:
    rows = _rows(
        rebuilt["withheld"],
        "SELECT role, allocator, allocator_version, consistent, variants FROM reconstructed_nodes",
    )
    assert len(rows) == 1
    return rows[0]


def test_a_log_naming_no_node_is_rebuilt_on_the_cases_only_engine(
    rebuilt: dict[str, Any],
) -> None:
    """A gateway in front of one engine logs no node: the requests are taken as the one node's
    that the nodes file and the engine log name, the node is rebuilt as when the log names it,
    and the lists are the same, every true party on them."""
    if "nodeless" not in rebuilt:
        pytest.skip("the default case only")
    db = rebuilt["nodeless"]
    assert _rows(db, "SELECT count(*) FROM reconstructed_nodes") == [(1,)]
    for unit in ("request_id", "account_id"):
        assert _affected(db, unit) == _affected(rebuilt["withheld"], unit)
        assert _affected(rebuilt["db"], unit) <= _affected(db, unit)


def test_two_engines_taken_as_the_one_logged_clear_nobody(rebuilt: dict[str, Any]) -> None:
    """The risk the inference takes: a second engine's requests, its log not collected, are
    taken as the one logged engine's. Its rebuild must then find no run that fits the log, so
    that nothing is cleared and every true party stays listed."""
    if "two_engines" not in rebuilt:
        pytest.skip("the default case only")
    db = rebuilt["two_engines"]
    assert _rows(db, "SELECT consistent FROM reconstructed_nodes") == [(False,)]
    cleared = "SELECT count(*) FROM cleared_findings WHERE evidence = 'reconstruction'"
    assert _rows(db, cleared) == [(0,)]
    for unit in ("request_id", "account_id"):
        assert _affected(rebuilt["db"], unit) <= _affected(db, unit)


def test_the_node_was_rebuilt_on_vllms_scheduler_with_the_logged_limits(
    rebuilt: dict[str, Any],
) -> None:
    role, allocator, version, consistent, variants = _node(rebuilt)
    assert (role, allocator) == ("unified", "vllm"), variants
    assert version and version.startswith("0.")
    if rebuilt["limits"]:  # read from the engine's start-up log
        assert "max_num_seqs 4, max_num_batched_tokens 64, chunked prefill on" in variants
    elif rebuilt["nocache"]:  # read from the engine banner; a run with caching on cleared
        assert "prefix caching off" in variants, variants  # true leakers
        assert consistent or _loaded(variants), variants
    elif rebuilt["http"]:  # the server's log names its seats; its steps are not in the log
        assert "max_num_seqs 8, max_num_batched_tokens not logged" in variants, variants
        # the log cannot bound how late outputs were logged: without a stated jitter, no run
        assert "do not mark the engine's steps" in variants and not consistent, variants
        assert "how much more the log cannot tell" in variants, variants
    else:  # the operator's seats (8) and the chunked-prefill line's budget, from the log
        assert "max_num_seqs 8, max_num_batched_tokens" in variants, variants
        assert _rows(rebuilt["db"], PREEMPTED)[0][0] == 0  # the tapped ledger: no preemption
        assert consistent or _loaded(variants), variants


def _loaded(variants: str) -> bool:
    """On a loaded machine the logged outputs of one step can spread until a request seems to
    span more steps than it has tokens (seen once in a fresh-clone run, with no preemption in
    the ledger), or until no step layout fits and the runs on the clock are more than are
    made: then no run is kept, the node says why, and it clears nobody
    (_cleared_only_true_negatives checks that)."""
    return (
        "spans more logged steps than it has" in variants
        or "runs on the clock per stub sharing; none is kept" in variants
    )


# Requests the tapped ledger shows allocated again after a free (vLLM preempted them).
PREEMPTED = (
    "SELECT count(DISTINCT a.request_id) FROM kv_events a JOIN (SELECT request_id, "
    "min(seq) AS first_free FROM kv_events WHERE op = 'free' GROUP BY 1) f "
    "ON a.request_id = f.request_id AND a.op = 'alloc' AND a.seq > f.first_free"
)


def test_the_servers_ledger_is_complete_after_it_stopped(rebuilt: dict[str, Any]) -> None:
    """vLLM's server, stopped with Ctrl-C (and a shutdown timeout), kills its engine core
    before the engine core's own shutdown reaches the scheduler: the tap closes its ledger
    when the engine core's loop ends, so every event it recorded is in a finished part."""
    if not rebuilt["http"]:
        pytest.skip("the server's shutdown only")
    case = rebuilt["case"]
    assert not list(case.rglob("*.tmp")), sorted(str(p) for p in case.rglob("*.tmp"))
    (status,) = [json.loads(p.read_text()) for p in (case / "tap").glob("status-*.json")]
    assert status["events_recorded"] == status["events_written"] > 0, status


def _cleared_only_true_negatives(rebuilt: dict[str, Any], db: Path) -> None:
    """Every pair `db` cleared is one the tapped ledger does not have; reconstruction cleared
    at least one cross-account candidate that did not leak where the node's runs fit the log,
    and nothing where none did."""
    pairs = "SELECT receiver_request_id, leaker_request_id FROM "
    true = set(_rows(rebuilt["db"], pairs + "exposure_tokens"))
    cleared = _rows(
        db,
        pairs.replace("FROM", ", receiver_account_id <> leaker_account_id FROM")
        + "cleared_findings WHERE evidence = 'reconstruction'",
    )
    assert not {(r, w) for r, w, _ in cleared} & true, "a true leaker was cleared"
    consistent, variants = _rows(db, "SELECT consistent, variants FROM reconstructed_nodes")[0]
    if consistent:
        assert any(cross for _, _, cross in cleared), f"a fitting node cleared none: {variants}"
    else:
        assert not cleared, f"a node no run fitted cleared some: {variants}"


def test_cleared_pairs_are_true_negatives_and_only_on_a_consistent_node(
    rebuilt: dict[str, Any],
) -> None:
    """(Under binding limits whether a run fits depends on how evenly the engine's steps were
    timed; both outcomes are checked for what they promise.)"""
    _cleared_only_true_negatives(rebuilt, rebuilt["withheld"])


def test_a_node_whose_log_names_no_limit_is_not_rebuilt_and_clears_nothing(
    rebuilt: dict[str, Any],
) -> None:
    """Binding limits with the engine's log withheld: no limit is known, and runs without them
    can fit the log and not be the engine's (on a loaded machine one such rebuild cleared a true
    leaker), so the node is not rebuilt, says why, clears nothing, and every true party stays
    listed."""
    if not rebuilt["limits"]:
        pytest.skip("binding limits only")
    db = rebuilt["unlogged"]
    assert _rows(db, "SELECT count(*) FROM reconstructed_nodes") == [(0,)]
    assert _rows(db, "SELECT reason FROM reconstruct_skipped") == [(NO_LIMITS,)]
    cleared = "SELECT count(*) FROM cleared_findings WHERE evidence = 'reconstruction'"
    assert _rows(db, cleared) == [(0,)]
    for unit in ("request_id", "account_id"):
        assert _affected(rebuilt["db"], unit) <= _affected(db, unit)


def test_a_block_size_the_log_does_not_name_is_derived_or_not_guessed(
    rebuilt: dict[str, Any],
) -> None:
    """Without the operator's block_size, the pool's 40 blocks and its 1,280 tokens give 32 and
    the node is rebuilt as with it; without the override line too, the size is only vLLM's
    default that the audit assumes, which is not this engine's (16 rebuilt this case and
    cleared a true leaker): the node is skipped, saying why, and nothing is cleared."""
    if not rebuilt["limits"]:
        pytest.skip("binding limits only")
    derived, assumed = rebuilt["derived"], rebuilt["assumed"]
    assert _rows(derived, "SELECT page_size FROM reconstructed_nodes") == [(32,)]
    assert _rows(derived, "SELECT source FROM node_facts WHERE fact = 'page_size'") == [
        ("vllm.blocks-override",)
    ]
    _cleared_only_true_negatives(rebuilt, derived)
    assert _rows(assumed, "SELECT count(*) FROM reconstructed_nodes") == [(0,)]
    assert _rows(assumed, "SELECT reason FROM reconstruct_skipped") == [(ASSUMED_PAGE_SIZE,)]
    cleared = "SELECT count(*) FROM cleared_findings WHERE evidence = 'reconstruction'"
    assert _rows(assumed, cleared) == [(0,)]
    for db in (derived, assumed):
        for unit in ("request_id", "account_id"):
            assert _affected(rebuilt["db"], unit) <= _affected(db, unit)


def test_a_true_stated_jitter_rebuilds_the_server_and_clears_only_true_negatives(
    rebuilt: dict[str, Any],
) -> None:
    """Through the server, stated the jitter the engine's steps needed: the runs are made
    over every set of steps it allows, and what they clear did not leak. (On a loaded machine
    the jitter needed can allow more sets than are run: then nothing is cleared.)"""
    if not rebuilt["http"]:
        pytest.skip("the server's log only")
    with duckdb.connect(str(rebuilt["db"]), read_only=True) as con:  # kvforensics jitter
        (measured,) = measure_delivery(con)
    assert measured.needed_us == needed_jitter_us(rebuilt["db"]), measured
    _cleared_only_true_negatives(rebuilt, rebuilt["stated"])
    (variants,) = _rows(rebuilt["stated"], "SELECT variants FROM reconstructed_nodes")[0]
    assert f"{rebuilt['jitter_ms']:.1f} ms of delivery jitter" in variants, variants
    for unit in ("request_id", "account_id"):
        assert _affected(rebuilt["db"], unit) <= _affected(rebuilt["stated"], unit)


def test_the_report_says_how_the_server_node_was_rebuilt_and_what_it_assumed(
    rebuilt: dict[str, Any], tmp_path: Path
) -> None:
    """The report's reconstructed section carries each node's reason: without a stated jitter
    that the log cannot bound it and that the node clears nobody; with one, the stated
    jitter."""
    if not rebuilt["http"]:
        pytest.skip("the server's log only")
    pages = {}
    for name in ("withheld", "stated"):
        out = tmp_path / name
        assert cli(["report", "--db", str(rebuilt[name]), "--out", str(out)]) in (0, 1)
        pages[name] = " ".join((out / "report.html").read_text(encoding="utf-8").split())
    assert "how much more the log cannot tell" in pages["withheld"]
    assert "it clears nobody" in pages["withheld"]
    assert f"{rebuilt['jitter_ms']:.1f} ms of delivery jitter" in pages["stated"]
