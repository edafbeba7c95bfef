"""Replay verdicts by evidence: outputs sampled (temperature 0.9, top-p 0.95) from the test model,
and outputs made by another attention implementation or precision than replay's.

The case: 6 victims (1-token stubs whose decode read another account's prompt KV at every other
position, output sampled from that KV), 6 clean controls (ordinary requests flagged by
screening, output sampled from their own prompt) and 3 decoys (stubs whose ledger shows the same
kind of stale read, but whose output was sampled from their own prompt). Expected: every victim
confirmed, no control and no decoy confirmed."""

from __future__ import annotations

from collections.abc import Callable

import duckdb
import numpy as np
import pytest

torch = pytest.importorskip(
    "torch", reason="replay needs the extra: pip install 'kvforensics[replay]'"
)
pytest.importorskip(
    "transformers", reason="replay needs the extra: pip install 'kvforensics[replay]'"
)

from support.replay_helpers import CaseBuilder, query  # noqa: E402

from forensics.replay.decode import prefill_logits  # noqa: E402
from forensics.replay.evidence import THRESHOLD_BITS  # noqa: E402
from forensics.replay.sampling import Sampling, sampled_decode  # noqa: E402
from forensics.replay.stage import run_case_replay  # noqa: E402
from forensics.replay.testmodel import build_test_model  # noqa: E402

PROMPT, N_OUT = 40, 128
VICTIMS = [f"V{i}" for i in range(6)]
CONTROLS = [f"C{i}" for i in range(6)]
DECOYS = [f"D{i}" for i in range(3)]
SAMPLED = Sampling(0.9, 0.95)
GREEDY = Sampling(0.0)


def ids(seed: int, n: int) -> list[int]:
    return np.random.default_rng(seed).integers(0, 384, n).tolist()


def text(seed: int, n: int) -> list[int]:
    """A prompt with the repetition of text: n tokens drawn from 12 token ids of its own (the
    test model's random weights tell contexts of uniformly random ids apart only weakly)."""
    rng = np.random.default_rng(seed)
    return rng.choice(rng.choice(384, 12, replace=False), n).tolist()


Producer = Callable[[dict[str, list[int]], list, list[int], int, Sampling], list[int]]


def producer(model, chunk: int | None = None) -> Producer:
    """Makes a delivered output: the first token from the prefill of `processed`, the rest
    decoded over the KV of `slots`, with `model` (its attention and dtype) and `chunk`."""

    def make(writers, slots, processed, n_out, sampling):
        first = prefill_logits(model, processed, chunk).float()
        return sampled_decode(model, writers, slots, first, n_out, sampling, chunk)

    return make


def build(path, make: Producer, sampling: Sampling, logged: bool = True):
    """The case database; `logged`: the request log carries the sampling settings."""
    b = CaseBuilder()
    settings = {"temperature": sampling.temperature, "top_p": sampling.top_p} if logged else {}

    def setting(seed: int) -> Sampling:
        return Sampling(sampling.temperature, sampling.top_p, sampling.top_k, seed)

    for i, rid in enumerate(VICTIMS + DECOYS):
        base, leaker, stub = 64 * i, f"L{i}", ids(500 + i, 1)
        l_prompt, prompt = text(100 + i, PROMPT), text(200 + i, PROMPT)
        b.request(leaker, f"acct-l{i}", PROMPT, 4, "d1", **settings)
        b.content(leaker, l_prompt, ids(300 + i, 4))
        b.event(10 * i + 1, "d1", leaker, "alloc", base, PROMPT)
        b.event(10 * i + 2, "d1", leaker, "write", base, PROMPT, 0, "transfer")
        b.event(10 * i + 3, "d1", leaker, "read", base, PROMPT, 0)
        b.event(10 * i + 4, "d1", leaker, "free", base, PROMPT)
        if rid in VICTIMS:  # the output came from the KV it read
            slots = [(rid, 0)] + [(leaker, p) for p in range(1, PROMPT)]
            out = make({rid: stub, leaker: l_prompt}, slots, stub, N_OUT, setting(i))
        else:  # the output came from its own prompt
            own = [(rid, p) for p in range(PROMPT)]
            out = make({rid: prompt}, own, prompt, N_OUT, setting(i))
        b.request(rid, f"acct-{rid}", PROMPT, N_OUT, "d1", **settings)
        b.content(rid, prompt, out, stub)
        b.event(10 * i + 5, "d1", rid, "alloc", base, PROMPT)
        b.event(10 * i + 6, "d1", rid, "write", base, 1, 0, "transfer")
        b.event(10 * i + 7, "d1", rid, "read", base, PROMPT, 0)
        b.exposure(rid, leaker, "d1", base + 1, PROMPT - 1)
    for i, rid in enumerate(CONTROLS):
        base, prompt = 64 * i, text(400 + i, PROMPT)
        own = [(rid, p) for p in range(PROMPT)]
        out = make({rid: prompt}, own, prompt, N_OUT, setting(100 + i))
        b.request(rid, f"acct-{rid}", PROMPT, N_OUT, "u1", **settings)
        b.content(rid, prompt, out)
        b.event(200 + 3 * i, "u1", rid, "alloc", base, PROMPT)
        b.event(201 + 3 * i, "u1", rid, "write", base, PROMPT, 0, "prefill")
        b.event(202 + 3 * i, "u1", rid, "read", base, PROMPT, 0)
        b.screened(rid, ["fast-ttft"])
    return b.write(path)


def replay(db) -> dict[str, tuple[str, str | None, float | None, str]]:
    con = duckdb.connect(str(db))
    run_case_replay(con, "test", "cpu", VICTIMS + CONTROLS + DECOYS)
    con.close()
    rows = query(db, "SELECT request_id, verdict, basis, evidence_bits, reason FROM replay_results")
    return {r[0]: r[1:] for r in rows}


def confirmed(verdicts, group: list[str]) -> list[str]:
    return [r for r in group if verdicts[r][0] == "confirmed"]


@pytest.fixture(scope="module")
def reference():
    torch.set_num_threads(1)
    return build_test_model("cpu")


@pytest.fixture(scope="module")
def sampled(reference, tmp_path_factory):
    db = build(tmp_path_factory.mktemp("sampled") / "case.duckdb", producer(reference), SAMPLED)
    return db, replay(db)


def test_sampled_victims_are_confirmed_by_evidence(sampled):
    _, verdicts = sampled
    assert confirmed(verdicts, VICTIMS) == VICTIMS, verdicts
    for rid in VICTIMS:
        verdict, basis, bits, reason = verdicts[rid]
        assert basis == "evidence" and bits >= THRESHOLD_BITS, reason
        assert "far more likely under the KV it read" in reason and "bits" in reason


def test_sampled_controls_and_decoys_are_not_confirmed(sampled):
    _, verdicts = sampled
    assert confirmed(verdicts, CONTROLS + DECOYS) == [], verdicts
    for rid in CONTROLS:  # nothing foreign was read: the two replays are one
        assert abs(verdicts[rid][2]) < 1e-3 and "no other request's data" in verdicts[rid][3]
    for rid in DECOYS:  # the output points to its own prompt
        assert verdicts[rid][2] < 0, verdicts[rid]
        assert "more likely under its own prompt" in verdicts[rid][3]


def test_the_evidence_is_kept_per_suspect(sampled):
    db, _ = sampled
    rows = query(
        db,
        "SELECT scored_tokens, tokens_for_contamination + tokens_for_clean <= scored_tokens, "
        "largest_token_bits >= 0, smallest_token_bits <= 0, score_temperature, "
        "plausibility_z > -4 FROM replay_results WHERE request_id = 'V0'",
    )
    assert rows == [(N_OUT, True, True, True, 0.9, True)]


def test_without_logged_settings_the_evidence_still_decides(reference, tmp_path):
    db = build(tmp_path / "case.duckdb", producer(reference), SAMPLED, logged=False)
    verdicts = replay(db)
    assert confirmed(verdicts, VICTIMS) == VICTIMS, verdicts
    assert confirmed(verdicts, CONTROLS + DECOYS) == []
    assert query(db, "SELECT DISTINCT score_temperature FROM replay_results") == [(1.0,)]


def test_greedy_outputs_are_reproduced(reference, tmp_path):
    db = build(tmp_path / "case.duckdb", producer(reference), GREEDY)
    verdicts = replay(db)
    assert {r: verdicts[r][:2] for r in VICTIMS} == {
        r: ("confirmed", "reproduced") for r in VICTIMS
    }
    assert confirmed(verdicts, CONTROLS + DECOYS) == []
    assert all("clean replay" in verdicts[r][3] for r in DECOYS)
    exposures = query(db, "SELECT DISTINCT receiver_request_id, confidence FROM exposures")
    assert sorted(exposures) == sorted(
        [(r, "confirmed") for r in VICTIMS] + [(r, "ledger") for r in DECOYS]
    )


def _eager(_reference):
    return producer(build_test_model("cpu", attn="eager"))


def _bf16(_reference):
    return producer(build_test_model("cpu").to(torch.bfloat16))


def _chunked(reference):
    return producer(reference, chunk=7)


@pytest.mark.parametrize("make", [_eager, _bf16, _chunked], ids=["eager", "bf16", "chunked"])
def test_outputs_from_other_kernels_still_confirm(reference, tmp_path, make):
    """Delivered outputs made with eager float32 attention, in bfloat16, or with the KV computed
    in chunks of 7 tokens; replay uses SDPA in float32 in one pass."""
    db = build(tmp_path / "case.duckdb", make(reference), SAMPLED)
    verdicts = replay(db)
    assert confirmed(verdicts, VICTIMS) == VICTIMS, verdicts
    assert confirmed(verdicts, CONTROLS + DECOYS) == [], verdicts
