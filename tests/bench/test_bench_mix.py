"""The bench's traffic mixes (forensics.bench.stages.MIXES): the short mix holds, as a real
incident would, a small share of over-pool prompts (each one stubbed, so it reads earlier
customers' KV and the analysis writes exposures), the same ones for the same seed."""

from __future__ import annotations

import numpy as np

from forensics.bench.stages import MIXES
from forensics.options import SimOptions
from forensics.simulate.run import scenario
from forensics.simulate.traffic import make_traffic


def _over_pool(mix: str, requests: int, seed: int) -> np.ndarray:
    sc = scenario(SimOptions(requests=requests, seed=seed, overrides=MIXES[mix]))
    return np.flatnonzero(make_traffic(requests, seed, sc).prompt_len > sc.prefill_pool)


def test_short_mix_has_a_small_share_of_over_pool_prompts() -> None:
    over = _over_pool("short", 40_000, 7)
    # one request in 2,000: 20 expected among 40,000; a binomial count stays within 5 and 40
    assert 5 <= len(over) <= 40, len(over)
    assert np.array_equal(over, _over_pool("short", 40_000, 7))  # deterministic by seed


def test_long_mix_is_mostly_long_context() -> None:
    over = _over_pool("long", 4_000, 7)
    # half the prompts are long (log-uniform from 20 % of the 1,048,576-token context up), and
    # ln(1,048,576 / 681,280) / ln(5) = 27 % of those exceed the prefill pool: 536 of 4,000
    assert 420 <= len(over) <= 660, len(over)
