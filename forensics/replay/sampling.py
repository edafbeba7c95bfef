"""Sampled decoding, as a serving engine does it: temperature, then top-k, then top-p (nucleus),
then one draw. The draw uses numpy's generator seeded per request on float64 probabilities, so
the same settings and seed give the same tokens on any device and torch version. Replay never
samples (it scores, forensics.replay.evidence); the simulator and the tests make delivered
outputs with it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from forensics.replay import attention, hfcompat
from forensics.replay.decode import Slot, input_device, rebuild_kv


@dataclass(frozen=True)
class Sampling:
    """A request's sampling settings; temperature 0 is greedy."""

    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0  # 0 or less: no top-k
    seed: int = 0

    @property
    def greedy(self) -> bool:
        return self.temperature <= 0

    def rng(self) -> np.random.Generator:
        return np.random.default_rng(self.seed)


def pick(logits: torch.Tensor, sampling: Sampling, rng: np.random.Generator) -> int:
    """One token from the last logits: argmax when greedy, else a draw after temperature, top-k
    and top-p."""
    if sampling.greedy:
        return int(torch.argmax(logits).item())
    z = logits.detach().double().cpu().numpy().reshape(-1) / sampling.temperature
    order = np.argsort(-z, kind="stable")
    if sampling.top_k > 0:
        order = order[: sampling.top_k]
    p = np.exp(z[order] - z[order[0]])
    p /= p.sum()
    if sampling.top_p < 1.0:
        keep = int(np.searchsorted(np.cumsum(p), sampling.top_p)) + 1
        order, p = order[:keep], p[:keep] / p[:keep].sum()
    return int(order[int(rng.choice(len(order), p=p))])


def sampled_decode(
    model: object,
    writers: Mapping[str, Sequence[int]],
    slots: Sequence[Slot],
    first_logits: torch.Tensor,
    n_out: int,
    sampling: Sampling,
    chunk: int | None = None,
) -> list[int]:
    """n_out tokens: the first drawn from first_logits (its prefill's), each later one drawn
    from the step that feeds the previous one at positions len(slots), len(slots)+1, … over the
    rebuilt KV of `slots` (as forensics.replay.decode.greedy_decode, but sampled); the writers'
    KV computed `chunk` tokens per forward pass."""
    if n_out <= 0:
        return []
    rng = sampling.rng()
    tokens = [pick(first_logits, sampling, rng)]
    with torch.inference_mode():
        attention.ensure(model)
        keys, values, _ = rebuild_kv(model, writers, slots, None, chunk)
        kv = hfcompat.new_cache()
        for layer, (k, v) in enumerate(zip(keys, values, strict=True)):
            kv.update(k, v, layer)
        device = input_device(model)
        for step in range(n_out - 1):
            ids = torch.tensor([[tokens[-1]]], dtype=torch.long, device=device)
            positions = torch.tensor([[len(slots) + step]], dtype=torch.long, device=device)
            out = hfcompat.forward(model, ids, positions, kv)
            tokens.append(pick(out.logits[0, -1].float(), sampling, rng))
    return tokens
