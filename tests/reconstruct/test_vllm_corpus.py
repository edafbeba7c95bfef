"""Real-vLLM cases under batched load with sampled outputs, replayed on transformers.

Four engine runs (tests/support/vllm_run.py, VLLM_RUN_SAMPLING=sampled: temperature 0.8, top-p
0.95, a seed per request; 24 requests of 4 accounts with shared prefixes, several in flight, a
pool of 40 blocks), each tapped with its contents, ingested and analysed with the CLI:

- `batched`: one request runs as a 1-token stub (its prefill attends stale KV);
- `batched-dup`: `dup-12` is handed the first block of `victim-10` while the victim still
  decodes; the ledger shows dup-12 writing over the victim's first 11 positions and the victim
  reading them, and dup-12 reading only what it wrote, so the victim is the receiver;
- `batched-collision`: `collide-14`'s first block is given the hash of account 3's cached
  prefix block, and the engine serves it that KV as a prefix-cache hit;
- `healthy-batched`: no fault.

The truth is what the injection did (run.json's `victims`), not the analysis. `kvforensics
replay` with the model folder the engine served, on the CPU, over every request of the run, must
confirm exactly those victims (by evidence: the outputs are sampled), and none of the healthy
run's requests."""

from __future__ import annotations

from typing import Any

import pytest
from support.vllm_serve import db_rows as _rows
from support.vllm_serve import replay_copy as _replay
from support.vllm_serve import serve_case as _serve
from support.vllm_serve import token_sha as _sha

SAMPLED = {"VLLM_RUN_SAMPLING": "sampled", "VLLM_RUN_SEED": "7", "BATCHED_STUB_AT": "21"}
FAULTED = ("batched", "batched-dup", "batched-collision")
CASES = (*FAULTED, "healthy-batched")
COLUMNS = "verdict, basis, evidence_bits, delivered_sha256, reason"


class Runs:
    """The cases, each served, ingested, analysed and replayed over all its requests when a
    test first asks for it (so that a selection of tests serves only what it needs)."""

    def __init__(self, served: dict[str, Any], factory: pytest.TempPathFactory):
        self.engine, self.factory = served, factory
        self.done: dict[str, dict[str, Any]] = {}

    def __getitem__(self, mode: str) -> dict[str, Any]:
        if mode not in self.done:
            base = self.factory.mktemp(mode)
            run = _serve(self.engine, mode, base, SAMPLED)
            model = self.engine["model"]
            folder = base / "replay"
            folder.mkdir()
            requests = sorted(run["outputs"])
            run["replay"] = _replay(run["db"], model, requests, folder, COLUMNS)
            self.done[mode] = run
        return self.done[mode]


@pytest.fixture(scope="module")
def runs(engine: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Runs:  # noqa: F811
    return Runs(engine, tmp_path_factory)


def _confirmed(run: dict[str, Any]) -> set[str]:
    return {r for r, v in run["replay"]["results"].items() if v[0] == "confirmed"}


@pytest.mark.parametrize("mode", CASES)
def test_the_runs_are_batched_sampled_and_logged(runs: Runs, mode: str) -> None:
    """At least 6 requests in flight; the request log carries the sampling settings (a seed
    of each request's own) and the engine's cached tokens; the tap kept every output."""
    run = runs[mode]
    assert run["sampling"] == "sampled" and run["most_in_flight"] >= 6
    settings = _rows(run["db"], "SELECT DISTINCT temperature, top_p, top_k FROM requests")
    assert settings == [(0.8, 0.95, 0)]
    seeds = _rows(run["db"], "SELECT count(DISTINCT seed), count(*) FROM requests")
    assert seeds == [(24, 24)]
    assert _rows(run["db"], "SELECT count(*) FROM requests WHERE cached_tokens > 0")[0][0] > 0
    contents = dict(_rows(run["db"], "SELECT request_id, output_token_ids FROM contents"))
    assert contents == run["outputs"]


@pytest.mark.parametrize("mode", CASES)
def test_the_faults_were_injected(runs: Runs, mode: str) -> None:
    """Each run did what it was made for (the engine's own account of it)."""
    faults = runs[mode]["faults"]
    victims = {
        "batched": ["stub-21"],
        "batched-dup": ["victim-10"],
        "batched-collision": ["collide-14"],
        "healthy-batched": [],
    }
    assert faults["victims"] == victims[mode]
    if mode == "batched-dup":
        assert faults["dup"]["victim"] == "victim-10" and faults["dup"]["request"] == "dup-12"
    if mode == "batched-collision":
        # served the other account's block from the prefix cache: 32 cached tokens, where its
        # own prompt (a new conversation) shares nothing with anyone's
        assert faults["collision"]["cached_tokens"] == 32


@pytest.mark.parametrize("mode", FAULTED)
def test_replay_confirms_exactly_the_injected_victims(runs: Runs, mode: str) -> None:
    run = runs[mode]
    results = run["replay"]["results"]
    assert set(results) == set(run["outputs"])
    from forensics.replay.evidence import THRESHOLD_BITS

    victims = set(run["faults"]["victims"])
    assert _confirmed(run) == victims, {r: v[4] for r, v in results.items() if r in victims}
    assert run["replay"]["code"] == 1
    for rid in victims:
        # a sampled output, which greedy decoding does not give: confirmed by the evidence
        # the delivered tokens (the engine's, as the tap kept them) weigh
        _, basis, bits, delivered, _ = results[rid]
        assert basis == "evidence" and bits >= THRESHOLD_BITS
        assert delivered == _sha(run["outputs"][rid])


def test_replay_confirms_no_request_of_the_healthy_run(runs: Runs) -> None:
    run = runs["healthy-batched"]
    assert run["analyze"] == 0
    assert run["replay"]["code"] == 0
    assert set(run["replay"]["results"]) == set(run["outputs"])
    assert _confirmed(run) == set()
