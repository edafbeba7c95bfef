"""The echo test model in transformers: its weights are the same bytes every time, its circuit
has the margins its docstring claims, a greedy continuation copies its own prompt, and a
1-token stub computed over another request's KV (the leaker's cache, then the stub's last
token at the next position) copies the leaker's prompt and not its own."""

from __future__ import annotations

import hashlib
import random
from pathlib import Path
from typing import Any

import pytest

from forensics.probe.check import longest_run
from forensics.replay import echomodel

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Any:
    folder = echomodel.save_echo_model(tmp_path_factory.mktemp("echo") / "a")
    loaded = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    return loaded.eval()


def _greedy(model: Any, ids: list[int], n: int, past: Any = None, at: int = 0) -> list[int]:
    """n greedy tokens after `ids`, the first of which sits at position `at`."""
    out: list[int] = []
    with torch.no_grad():
        x = torch.tensor([ids])
        for _ in range(n):
            pos = torch.arange(at, at + x.shape[1])[None]
            step = model(input_ids=x, position_ids=pos, past_key_values=past, use_cache=True)
            past, at = step.past_key_values, at + x.shape[1]
            token = int(step.logits[0, -1].argmax())
            out.append(token)
            x = torch.tensor([[token]])
    return out


def test_the_weights_are_the_same_bytes_every_time(tmp_path: Path) -> None:
    digests = set()
    for name in ("a", "b"):
        folder = echomodel.save_echo_model(tmp_path / name)
        digests.add(hashlib.sha256((folder / "model.safetensors").read_bytes()).hexdigest())
    assert len(digests) == 1


def test_the_circuit_has_its_margins() -> None:
    theta = echomodel.inv_freq()
    assert theta[echomodel.POS_PAIRS] * echomodel.MAX_POSITIONS < 0.21  # content pairs ~still
    for offset in (1, 2):
        scores = echomodel.position_scores(offset)
        assert int(scores.argmax()) == offset and echomodel.position_gap(offset) > 0.5
    assert echomodel.coherence(echomodel.token_codes()) < 0.25


def test_a_greedy_continuation_copies_its_own_prompt(model: Any) -> None:
    rng = random.Random(3)
    for n in (64, 300, 900):
        prompt = [rng.randrange(3, 512) for _ in range(n)]
        assert longest_run(_greedy(model, prompt, 16), prompt) >= 12, n


@pytest.mark.parametrize("shift", [0, 300])
def test_a_stub_over_another_requests_kv_copies_that_request(model: Any, shift: int) -> None:
    """shift: the leaker wrote its KV that many positions further on (pages reused at another
    place of the sequence, as vLLM's free pages are): rotary keys the stub's positions do not
    expect, where a head that read its own position would copy the stub's own token."""
    rng = random.Random(5)
    for n in (200, 600):
        leaker = [rng.randrange(3, 512) for _ in range(n)]
        stub = [rng.randrange(3, 512) for _ in range(n)]
        with torch.no_grad():
            pos = torch.arange(shift, shift + n - 1)[None]
            ids = torch.tensor([leaker[: n - 1]])
            cache = model(input_ids=ids, position_ids=pos, use_cache=True).past_key_values
        out = _greedy(model, stub[-1:], 16, cache, at=n - 1)
        assert longest_run(out, leaker) >= 8, (n, out)
        assert longest_run(out, stub) < 8
