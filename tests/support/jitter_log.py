"""An independent model of a gateway log in front of an engine's server: requests of n_out
tokens, one per engine step from their first token, the engine's steps at random times, each
output logged a random delay (up to `delay_us`) after its step."""

from __future__ import annotations

import itertools
import random
from types import SimpleNamespace


def log(
    seed: int, n: int, delay_us: int, sent_us: int = 2_000
) -> tuple[list[SimpleNamespace], list[int]]:
    """n overlapping requests: their logged times and their true first-token steps; each
    received up to sent_us before the step before its first one ended."""
    rng = random.Random(seed)
    firsts = sorted(rng.randrange(1, 3 * n) for _ in range(n))
    outs = [rng.randrange(2, 9) for _ in range(n)]
    last = max(f + k - 1 for f, k in zip(firsts, outs, strict=True))
    at = list(itertools.accumulate(rng.randrange(2_000, 9_000) for _ in range(last + 1)))
    reqs = [
        SimpleNamespace(
            request_id=f"r{i}",
            n_out=k,
            received_us=at[f - 1] + 1 - rng.randrange(0, sent_us + 1),
            first_token_us=at[f] + rng.randrange(0, delay_us + 1),
            completed_us=at[f + k - 1] + rng.randrange(0, delay_us + 1),
        )
        for i, (f, k) in enumerate(zip(firsts, outs, strict=True))
    ]
    return reqs, firsts
