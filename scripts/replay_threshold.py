"""Measure replay's evidence threshold with the test model (docs/DESIGN.md §5, README "Replay").

For N pairs, a stub request (one processed token, billed prompt P) whose decode read another
request's KV at positions 1..P-1 is scored both ways (forensics.replay.evidence):

- as a clean control: its delivered output sampled from its own prompt (what a request that was
  not contaminated delivers), while the ledger says it read the other request's KV;
- as a victim: its delivered output sampled from the KV it read.

It prints the largest control LLR, how many controls reach each threshold (the false-confirmation
rate), and the share of victims confirmed. Run: .venv/bin/python scripts/replay_threshold.py [N]
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from forensics.replay.decode import decode_own, decode_with_evidence, prefill_logits  # noqa: E402
from forensics.replay.evidence import THRESHOLD_BITS, weigh  # noqa: E402
from forensics.replay.sampling import Sampling, sampled_decode  # noqa: E402
from forensics.replay.testmodel import build_test_model, exact_float32  # noqa: E402

SETTINGS = (Sampling(0.7, 0.95), Sampling(0.9, 0.95), Sampling(1.0, 1.0), Sampling(1.0, 0.9, 40))


def llr(model, stub, prompt, writer, n_out, delivered, temperature) -> float:
    slots = [("R", 0)] + [("W", i) for i in range(1, len(prompt))]
    writers = {"R": stub, "W": writer}
    first = prefill_logits(model, stub)
    dirty = decode_with_evidence(
        model,
        writers,
        slots,
        int(first.argmax()),
        n_out,
        None,
        None,
        delivered,
        first,
        temperature,
    )
    _, clean = decode_own(model, prompt, n_out, None, delivered, temperature)
    evidence = weigh(dirty.scores, clean.scores, temperature)
    return evidence.bits


def main(n: int = 200) -> None:
    exact_float32("cpu")
    model = build_test_model("cpu")
    controls: list[float] = []
    victims: list[float] = []
    for i in range(n):
        rng = np.random.default_rng(1000 + i)
        p_len, n_out = int(rng.integers(16, 64)), int(rng.integers(8, 48))
        prompt = rng.integers(0, 384, p_len).tolist()
        writer = rng.integers(0, 384, p_len + 8).tolist()
        stub = [int(rng.integers(0, 384))]
        sampling = SETTINGS[i % len(SETTINGS)]
        sampling = Sampling(sampling.temperature, sampling.top_p, sampling.top_k, seed=i)
        t = sampling.temperature
        own = sampled_decode(
            model,
            {"R": prompt},
            [("R", j) for j in range(p_len)],
            prefill_logits(model, prompt),
            n_out,
            sampling,
        )
        controls.append(llr(model, stub, prompt, writer, n_out, own, t))
        slots = [("R", 0)] + [("W", j) for j in range(1, p_len)]
        read = sampled_decode(
            model, {"R": stub, "W": writer}, slots, prefill_logits(model, stub), n_out, sampling
        )
        victims.append(llr(model, stub, prompt, writer, n_out, read, t))
    c, v = np.array(controls), np.array(victims)
    print(f"{n} controls: LLR max {c.max():+.1f} bits, median {np.median(c):+.1f}")
    for b in (5, 10, 15, 20):
        print(f"  controls at >= {b} bits: {(c >= b).sum()} of {n}; victims: {(v >= b).sum()}")
    print(f"{n} victims: LLR min {v.min():+.1f}, median {np.median(v):+.1f}")
    print(
        f"threshold {THRESHOLD_BITS:g} bits: false confirmations {(c >= THRESHOLD_BITS).sum()}"
        f"/{n}, victims confirmed {(v >= THRESHOLD_BITS).sum()}/{n}"
    )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 200)
