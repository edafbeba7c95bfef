"""Replay's fast path: fast and eager attention give the same verdicts; the first decode step's
shares equal transformers' own eager attention weights; memory is planned before anything runs;
a writer several suspects read is rebuilt once."""

from __future__ import annotations

import inspect
import shutil

import duckdb
import numpy as np
import pytest

torch = pytest.importorskip(
    "torch", reason="replay needs the extra: pip install 'kvforensics[replay]'"
)
pytest.importorskip(
    "transformers", reason="replay needs the extra: pip install 'kvforensics[replay]'"
)

from support.replay_helpers import CaseBuilder  # noqa: E402

from forensics.replay import decode, hfcompat, memory  # noqa: E402
from forensics.replay.decode import (  # noqa: E402
    decode_with_evidence,
    greedy_decode,
    prefill_first_token,
    rebuild_kv,
)
from forensics.replay.replay import replay_loaded  # noqa: E402
from forensics.replay.testmodel import build_test_model  # noqa: E402


def ids(seed: int, n: int) -> list[int]:
    return np.random.default_rng(seed).integers(0, 384, n).tolist()


@pytest.fixture(scope="module")
def fast():
    torch.set_num_threads(1)
    return build_test_model("cpu")


@pytest.fixture(scope="module")
def eager():
    return build_test_model("cpu", attn="eager")


@pytest.fixture(scope="module")
def shared_case(fast, tmp_path_factory):
    """Leaker L (40 tokens); stubs A and B both read L's KV; C read L's positions 0..19 at its
    own positions 20..39 and its own prompt before; A's delivered output does not match."""
    b = CaseBuilder()
    l_prompt = ids(1, 40)
    b.request("L", "acct-l", 40, 3, "d1")
    b.content("L", l_prompt, [1, 2, 3])
    b.event(1, "d1", "L", "write", 0, 40, 0, "transfer")
    b.event(2, "d1", "L", "free", 0, 40)
    for n, (rid, stub) in enumerate((("A", [5]), ("B", [9]))):
        slots = [(rid, 0)] + [("L", i) for i in range(1, 40)]
        out = greedy_decode(
            fast, {rid: stub, "L": l_prompt + [1, 2, 3]}, slots, prefill_first_token(fast, stub), 6
        )
        b.request(rid, f"acct-{rid}", 40, 6, "d1")
        b.content(rid, ids(10 + n, 40), out if rid == "B" else [0] * 6, stub)
        b.event(3 + 3 * n, "d1", rid, "write", 0, 1, 0, "transfer")
        b.event(4 + 3 * n, "d1", rid, "read", 0, 40, 0)
        b.exposure(rid, "L", "d1", 1, 39)
    return b.write(tmp_path_factory.mktemp("shared") / "case.duckdb")


def replay_with(model, db, tmp_path, request_ids):
    copy = tmp_path / f"{id(model)}.duckdb"
    shutil.copy(db, copy)
    con = duckdb.connect(str(copy))
    try:
        return replay_loaded(con, model, request_ids)
    finally:
        con.close()


def test_fast_and_eager_attention_give_the_same_verdicts(fast, eager, shared_case, tmp_path):
    got = {}
    for name, model in (("fast", fast), ("eager", eager)):
        got[name] = replay_with(model, shared_case, tmp_path, ["A", "B"])
    assert [r.verdict for r in got["fast"]] == ["not-reproduced", "confirmed"]
    for f, e in zip(got["fast"], got["eager"], strict=True):
        assert (f.verdict, f.contaminated_sha256, f.clean_sha256) == (
            e.verdict,
            e.contaminated_sha256,
            e.clean_sha256,
        )
        for writer, (share, slots) in f.attention.items():
            assert e.attention[writer][1] == slots
            assert e.attention[writer][0] == pytest.approx(share, abs=1e-5)


def test_shares_equal_transformers_eager_attention_weights(fast):
    """The oracle: transformers' own eager attention returns the full attention matrix of the
    first decode step; its last row, averaged over layers and heads, summed per writer."""
    reference = build_test_model("cpu")
    reference.set_attn_implementation("eager")
    stub, other = [11], ids(4, 30)
    writers = {"R": stub, "B": other}
    slots = [("R", 0)] + [("B", i) for i in range(1, 25)] + [None] * 5
    first = prefill_first_token(fast, stub)
    ours = decode_with_evidence(fast, writers, slots, first, 3)
    keys, values, _ = rebuild_kv(fast, writers, slots)
    cache = hfcompat.new_cache()
    for layer, (k, v) in enumerate(zip(keys, values, strict=True)):
        cache.update(k, v, layer)
    name = (
        "cache" if "cache" in inspect.signature(reference.forward).parameters else "past_key_values"
    )
    with torch.inference_mode():
        out = reference(
            input_ids=torch.tensor([[first]]),
            position_ids=torch.tensor([[30]]),
            use_cache=True,
            output_attentions=True,
            **{name: cache},
        )
    per_slot = torch.stack([a[0, :, -1, :30] for a in out.attentions]).mean(dim=(0, 1))
    expected_b = float(per_slot[1:25].sum())
    assert ours.writer_share["B"] == pytest.approx(expected_b, abs=1e-6)
    assert ours.writer_share["R"] == pytest.approx(float(per_slot[0]), abs=1e-6)
    assert ours.uninitialised_share == pytest.approx(float(per_slot[25:].sum()), abs=1e-6)


def test_a_shared_writer_is_rebuilt_once(fast, shared_case, tmp_path, monkeypatch):
    runs: list[int] = []
    real = decode.run_tokens

    def counting(model, tokens, count, chunk=None):
        runs.append(count)
        return real(model, tokens, count, chunk)

    monkeypatch.setattr(decode, "run_tokens", counting)
    together = replay_with(fast, shared_case, tmp_path, ["A", "B"])
    # A: clean prompt (40), stub (1), own stub KV (1), L (40); B: the same but L is kept.
    assert sorted(runs) == [1, 1, 1, 1, 40, 40, 40]
    runs.clear()
    alone = [replay_with(fast, shared_case, tmp_path, [r])[0] for r in ("A", "B")]
    assert sorted(runs) == [1, 1, 1, 1, 40, 40, 40, 40]
    assert [
        (r.verdict, r.contaminated_sha256, r.tokens + (40 if r.request_id == "B" else 0))
        for r in together
    ] == [(r.verdict, r.contaminated_sha256, r.tokens) for r in alone]


def test_a_suspect_that_cannot_fit_is_cannot_replay_with_the_numbers(
    fast, shared_case, tmp_path, monkeypatch
):
    shape = memory.model_shape(fast)
    # 3 layers x (K and V) x 2 KV heads x 16 dims x 4 bytes, by hand from the test config.
    assert shape.kv_per_token == 3 * 2 * 2 * 16 * 4
    monkeypatch.setattr(memory, "available_ram", lambda: 100_000)
    result = replay_with(fast, shared_case, tmp_path, ["B"])[0]
    assert result.verdict == "cannot-replay"
    assert result.reason.startswith("does not fit in memory: needs ")
    assert "would fit: a machine with at least" in result.reason
    assert "smallest (1 token per pass)" in result.reason


def test_the_chunk_shrinks_to_what_fits(fast):
    shape = memory.model_shape(fast)
    roomy = memory.plan(fast, shape, 1000, 1000, 4, free=1 << 40)
    assert roomy.fits and roomy.chunk == memory.CHUNK_CAP["cpu"]
    kv = roomy.kv_bytes
    # the 1004 keys twice (the rebuilt KV and the decode cache's copy) + one layer's
    assert kv == shape.kv_per_token * 2 * 1004 + 768 * 1004 // 3
    # a writer longer than the context: the keys and that writer
    longer = memory.plan(fast, shape, 100, 1000, 4, free=1 << 40).kv_bytes
    assert longer == shape.kv_per_token * (104 + 1000) + 768 * 104 // 3
    tight = memory.plan(fast, shape, 1000, 1000, 4, free=kv + shape.activations(64, 1004, True))
    assert tight.fits and tight.chunk == 64
    assert not memory.plan(fast, shape, 1000, 1000, 4, free=kv).fits


def test_chunk_size_does_not_change_the_tokens(fast):
    prompt = ids(7, 45)
    slots = [("A", i) for i in range(45)]
    first = prefill_first_token(fast, prompt, chunk=45)
    whole = decode_with_evidence(fast, {"A": prompt}, slots, first, 6, chunk=45)
    for chunk in (1, 7, 16):
        assert prefill_first_token(fast, prompt, chunk=chunk) == first
        assert (
            decode_with_evidence(fast, {"A": prompt}, slots, first, 6, chunk=chunk).tokens
            == whole.tokens
        )


def test_speed_measurement_reaches_a_verdict(fast):
    from forensics.replay import speed

    row = speed.measure(fast, 96, 3, 4)
    assert row.verdict == "confirmed", row.reason
    assert row.prefill_tokens_per_s and row.replay_tokens_per_s and row.ratio
    # clean prefill (96) + its 3 decode steps + the stub's prefill (1) + the stub's own KV (1)
    # + three leakers of 32 positions + the contaminated decode's 3 steps
    assert row.replay_tokens == 96 + 3 + 1 + 1 + 3 * 32 + 3
    assert "confirmed" in speed.table([row], "t")


@pytest.mark.parametrize("wrong_at", [0, 1, 4, 7])
def test_checking_against_the_delivered_output_gives_the_greedy_tokens(fast, wrong_at):
    """The oracle is step-by-step greedy decoding; the delivered output differs at wrong_at."""
    from forensics.replay.decode import decode_own

    stub, other = [21], ids(30, 24)
    writers = {"R": stub, "B": other}
    slots = [("R", 0)] + [("B", i) for i in range(1, 24)]
    first = prefill_first_token(fast, stub)
    greedy = decode_with_evidence(fast, writers, slots, first, 8)
    delivered = list(greedy.tokens)
    delivered[wrong_at] = (delivered[wrong_at] + 1) % 384
    checked = decode_with_evidence(fast, writers, slots, first, 8, expected=delivered)
    # the delivered tokens are fed (teacher-forced): greedy tokens up to the first difference
    assert checked.tokens == greedy.tokens[: wrong_at + 1]
    assert checked.scores is not None and len(checked.scores.bits) == 7
    assert checked.scores.greedy[: max(0, wrong_at - 1)] == greedy.tokens[1:wrong_at]
    if wrong_at > 0:  # the first step fed the same token
        assert checked.writer_share == pytest.approx(greedy.writer_share, abs=1e-6)
    matched = decode_with_evidence(fast, writers, slots, first, 8, expected=greedy.tokens)
    assert matched.tokens == greedy.tokens and matched.forwarded_tokens == 1 + 24 + 7
    own_greedy = decode_own(fast, other, 8)[1].tokens
    wrong = list(own_greedy)
    wrong[wrong_at] = (wrong[wrong_at] + 1) % 384
    assert decode_own(fast, other, 8, expected=wrong)[1].tokens == own_greedy[: wrong_at + 1]


def test_plain_prefill_falls_back_when_sdpa_runs_out_of_memory(fast, monkeypatch):
    from forensics.replay import speed

    real = type(fast).forward

    def forward(self, *args, **kwargs):
        if self.config._attn_implementation == "sdpa":
            raise torch.OutOfMemoryError("CUDA out of memory (simulated)")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(type(fast), "forward", forward)
    rate, how = speed.plain_prefill(fast, 64, 384)
    assert rate and how == "kvforensics"
    assert fast.config._attn_implementation == "kvforensics"
