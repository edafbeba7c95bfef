"""The KV rebuild and greedy decode against independent oracles (transformers' own generate)."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

torch = pytest.importorskip(
    "torch", reason="replay needs the extra: pip install 'kvforensics[replay]'"
)
pytest.importorskip(
    "transformers", reason="replay needs the extra: pip install 'kvforensics[replay]'"
)

from forensics.errors import ReplayError  # noqa: E402
from forensics.replay import decode  # noqa: E402
from forensics.replay.decode import (  # noqa: E402
    decode_with_evidence,
    greedy_decode,
    prefill_first_token,
)
from forensics.replay.loader import load_model  # noqa: E402
from forensics.replay.testmodel import (  # noqa: E402
    build_test_model,
    generated_weights,
    save_test_model,
)

# SHA-256 of the test model's weights (sorted names, float32 little-endian bytes). The sample
# incident's outputs were decoded with these weights: if numpy's generator ever changes its
# stream, the sample no longer replays, and this fails first.
PINNED_WEIGHTS_SHA256 = "f8265d2a8a80ad917c622eb914f5e4d6ae5100006c56ea882e7f826e766084c2"


@pytest.fixture(scope="module")
def model():
    torch.set_num_threads(1)  # tiny matrices: threads only add waiting on a shared CPU
    return build_test_model("cpu")


def tokens(seed: int, n: int) -> list[int]:
    return np.random.default_rng(seed).integers(0, 384, n).tolist()


@pytest.fixture(scope="module")
def oracle():
    """The same weights with transformers' own eager attention (not replay's kernels)."""
    reference = build_test_model("cpu")
    reference.set_attn_implementation("eager")
    return reference


def generate(model, prompt: list[int], n: int) -> list[int]:
    """The oracle: transformers' own greedy generation from the prompt."""
    out = model.generate(
        torch.tensor([prompt]),
        max_new_tokens=n,
        do_sample=False,
        attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
    )
    return out[0, len(prompt) :].tolist()


def test_own_slots_decode_equals_generate(model, oracle):
    prompt = tokens(1, 40)
    slots = [("A", i) for i in range(len(prompt))]
    first = prefill_first_token(model, prompt)
    assert greedy_decode(model, {"A": prompt}, slots, first, 12) == generate(oracle, prompt, 12)


def test_chunked_prefill_gives_the_same_tokens(model, oracle, monkeypatch):
    prompt = tokens(2, 37)
    expected = generate(oracle, prompt, 8)
    monkeypatch.setattr(decode, "CHUNK_TOKENS", 5)
    slots = [("A", i) for i in range(len(prompt))]
    assert (
        greedy_decode(model, {"A": prompt}, slots, prefill_first_token(model, prompt), 8)
        == expected
    )


def test_reader_of_another_requests_full_kv_continues_that_request(model, oracle):
    """R's slots all hold B's prompt KV at B's own positions: R decodes exactly as B would."""
    b_prompt = tokens(3, 30)
    slots = [("B", i) for i in range(len(b_prompt))]
    first = prefill_first_token(model, b_prompt)
    writers = {"R": [7], "B": b_prompt}
    assert greedy_decode(model, writers, slots, first, 10) == generate(oracle, b_prompt, 10)


def test_foreign_kv_changes_the_output_and_takes_attention(model):
    stub, other = [11], tokens(4, 30)
    first = prefill_first_token(model, stub)
    dirty = decode_with_evidence(
        model, {"R": stub, "B": other}, [("R", 0)] + [("B", i) for i in range(1, 30)], first, 10
    )
    zeros = decode_with_evidence(model, {"R": stub}, [("R", 0)] + [None] * 29, first, 10)
    assert dirty.tokens != zeros.tokens
    assert dirty.tokens[0] == zeros.tokens[0] == first
    assert set(dirty.writer_share) == {"B", "R"} and dirty.uninitialised_share == 0
    assert 0 < dirty.writer_share["B"] < 1
    assert zeros.uninitialised_share > 0 and set(zeros.writer_share) == {"R"}
    assert sum(dirty.writer_share.values()) < 1  # the step's own token takes the rest


def test_writer_keys_keep_their_own_rotation(model):
    """B's positions 10..19 placed at R's positions 0..9 are not B's positions 0..9."""
    other = tokens(5, 20)
    first = prefill_first_token(model, [3])
    shifted = greedy_decode(model, {"B": other}, [("B", 10 + i) for i in range(10)], first, 8)
    aligned = greedy_decode(model, {"B": other[10:]}, [("B", i) for i in range(10)], first, 8)
    assert shifted != aligned


def test_missing_writer_or_position_is_an_error(model):
    with pytest.raises(ReplayError, match="no tokens for writer B"):
        greedy_decode(model, {"R": [1]}, [("R", 0), ("B", 0)], 1, 3)
    with pytest.raises(ReplayError, match="position 5"):
        greedy_decode(model, {"R": [1, 2]}, [("R", 5)], 1, 3)


def test_zero_output_tokens_and_single_token(model):
    assert greedy_decode(model, {"A": [1, 2]}, [("A", 0), ("A", 1)], 9, 0) == []
    assert greedy_decode(model, {"A": [1, 2]}, [("A", 0), ("A", 1)], 9, 1) == [9]


def test_saved_directory_loads_to_the_same_model(oracle, tmp_path):
    path = save_test_model(tmp_path / "tiny")
    loaded = load_model(str(path), "cpu")
    assert loaded.config._attn_implementation == "kvforensics"
    prompt = tokens(6, 25)
    assert generate(loaded, prompt, 8) == generate(oracle, prompt, 8)


def test_device_map_auto_loads_a_folder(oracle, tmp_path):
    pytest.importorskip("accelerate", reason="--device-map auto needs accelerate")
    loaded = load_model(str(save_test_model(tmp_path / "tiny")), "cpu", device_map="auto")
    prompt = tokens(8, 12)
    assert generate(loaded, prompt, 4) == generate(oracle, prompt, 4)


def test_weights_are_deterministic_and_pinned():
    first, second = generated_weights(), generated_weights()
    assert list(first) == sorted(first)
    digest = hashlib.sha256()
    for name, array in first.items():
        assert array.dtype == np.float32 and np.array_equal(array, second[name])
        digest.update(name.encode() + array.astype("<f4").tobytes())
    assert digest.hexdigest() == PINNED_WEIGHTS_SHA256
