"""Sampled outputs in the simulator: each request's sampling settings (a mix, most at a
temperature above 0, some greedy) in requests.csv, outputs sampled with them from the test model,
and a replay of the case that confirms its receivers by evidence and no clean request."""

from __future__ import annotations

import hashlib

import duckdb
import polars as pl
import pytest

from forensics.options import SimOptions
from forensics.simulate.run import simulate

pytest.importorskip("torch", reason="--model test needs the replay extra")
pytest.importorskip("transformers", reason="--model test needs the replay extra")

SAMPLING = ["temperature", "top_p", "top_k", "seed"]
# Text-like prompts (each part drawn from 12 token ids of its own): the random-weight test model
# tells contexts of uniformly random ids apart only weakly, so its sampled outputs would carry
# little evidence of what was read.
WORDS = (("prompt_words", 12),)


def _files(case) -> dict[str, str]:
    return {
        str(p.relative_to(case)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(case.rglob("*"))
        if p.is_file()
    }


def test_requests_carry_a_mix_of_settings_and_the_same_seed_gives_the_same_files(tmp_path):
    opts = SimOptions(requests=60, seed=5, scale=0.0005, days=0.05, model="test", overrides=WORDS)
    simulate(tmp_path / "a", opts)
    simulate(tmp_path / "b", opts)
    assert _files(tmp_path / "a") == _files(tmp_path / "b")
    req = pl.read_csv(tmp_path / "a" / "requests.csv")
    assert req.columns[-4:] == SAMPLING
    sampled = req.filter(pl.col("temperature") > 0)
    greedy = req.filter(pl.col("temperature") == 0)
    assert sampled.height > greedy.height > 0
    assert set(sampled["temperature"]) <= {0.7, 0.8, 0.9, 1.0}
    assert set(sampled["top_p"]) <= {0.9, 0.95, 1.0} and set(greedy["top_p"]) == {1.0}
    assert req["seed"].n_unique() == req.height
    # greedy only: the same traffic and ledger, no sampling columns
    simulate(tmp_path / "g", SimOptions(**{**opts.__dict__, "sampling": "greedy"}))
    assert "temperature" not in pl.read_csv(tmp_path / "g" / "requests.csv").columns
    ledger = _files(tmp_path / "g")
    assert {k: v for k, v in ledger.items() if k.startswith(("kv_events", "ground_truth"))} == {
        k: v for k, v in _files(tmp_path / "a").items() if k.startswith(("kv_events", "ground"))
    }


def test_replay_confirms_sampled_receivers_by_evidence_and_no_clean_request(tmp_path, cli):
    """About 40 s: the simulation's test-model sampling, then the replay of 3 receivers (2
    sampled, 1 greedy) and 8 clean requests."""
    case = tmp_path / "case"
    simulate(
        case,
        SimOptions(requests=120, seed=11, scale=0.001, days=0.3, model="test", overrides=WORDS),
    )
    db = tmp_path / "case.duckdb"
    assert cli("ingest", str(case), "--db", str(db))[0] == 0
    assert cli("analyze", "--db", str(db))[0] == 1
    receivers = set(pl.read_csv(case / "ground_truth" / "receiving_requests.csv")["request_id"])
    leakers = set(pl.read_csv(case / "ground_truth" / "leaking_requests.csv")["request_id"])
    req = pl.read_csv(case / "requests.csv")
    clean = req.filter(
        ~pl.col("request_id").is_in(receivers | leakers)
        & (pl.col("http_status") == 200)
        & (pl.col("completion_tokens") >= 16)
    ).sort("prompt_tokens")
    clean = pl.concat(
        [clean.filter(pl.col("temperature") > 0).head(6), clean.filter(pl.col("temperature") == 0)]
    ).head(8)
    assert clean.height == 8 and clean["temperature"].min() == 0
    picked = [*sorted(receivers), *clean["request_id"]]
    args = [a for r in picked for a in ("--request", r)]
    code, _, err = cli("replay", "--db", str(db), "--model", "test", "--device", "cpu", *args)
    assert code in (0, 1), err
    con = duckdb.connect(str(db), read_only=True)
    rows = con.execute(
        "SELECT r.request_id, r.verdict, r.basis, r.evidence_bits, q.temperature "
        "FROM replay_results r JOIN requests q USING (request_id)"
    ).fetchall()
    got = {r: (verdict, basis, bits, t) for r, verdict, basis, bits, t in rows}
    assert set(got) == set(picked)
    sampled_receivers = [r for r in receivers if got[r][3] > 0]
    assert len(sampled_receivers) >= 2
    for r in receivers:
        verdict, basis, bits, temperature = got[r]
        assert verdict == "confirmed", (r, got[r])
        if temperature > 0:
            assert basis == "evidence" and bits >= 10, (r, got[r])
    assert [got[r][0] for r in clean["request_id"]] == ["not-reproduced"] * 8, got
