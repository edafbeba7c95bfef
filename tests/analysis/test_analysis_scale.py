"""Range length does not cost: a ledger with million-slot ranges gives the same pieces (up to
scale) and the same work as the same ledger with hundred-slot ranges."""

from __future__ import annotations

import time

import numpy as np

from forensics.analysis.sweep import ALLOC, FREE, READ, WRITE, sweep_node


def _incident(scale: int, requests: int = 200) -> tuple[np.ndarray, ...]:
    """Each request allocs the same pool region, writes only its first slot, reads it all and
    frees: every read sees the previous request's stale data in all but one slot."""
    req, op, start, count = [], [], [], []
    for r in range(requests):
        for o, c in ((ALLOC, scale), (WRITE, 1 if r % 2 else scale), (READ, scale), (FREE, scale)):
            req.append(r)
            op.append(o)
            start.append(0)
            count.append(c)
    n = len(req)
    return (np.array(req), np.array(op), np.array(start), np.array(count), np.full(n, -1, np.int64))


def test_million_slot_ranges_cost_what_hundred_slot_ranges_cost() -> None:
    timings = {}
    results = {}
    for scale in (100, 1_000_000):
        sweep_node(*_incident(scale, 2))  # warm the compiled code
        started = time.perf_counter()
        results[scale] = sweep_node(*_incident(scale))
        timings[scale] = time.perf_counter() - started
    small, large = results[100], results[1_000_000]
    for a, b in zip(small, large, strict=True):
        assert a.shape == b.shape  # the same number of pieces, whatever the range length
    ex_small, ex_large = small[0], large[0]
    # the 100 odd requests (1-slot writes) read their predecessor's data
    assert len(ex_large) == 100
    assert (ex_large[:, 2] - ex_large[:, 1] == 1_000_000 - 1).all()
    assert (ex_small[:, 2] - ex_small[:, 1] == 100 - 1).all()
    print(
        f"sweep of 800 events: 100-slot ranges {timings[100] * 1e3:.2f} ms, "
        f"1,000,000-slot ranges {timings[1_000_000] * 1e3:.2f} ms"
    )
