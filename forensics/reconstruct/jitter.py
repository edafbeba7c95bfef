"""The engine steps of a vLLM unified node's requests when the gateway's times carry delivery
jitter, for unified.py.

A gateway in front of vLLM's server does not see the engine's steps: it logs a request's
first token and completion when their chunks reach it, a few milliseconds after the step that
made them, and the delay differs per request (measured through vLLM 0.32's OpenAI server on 2
cores: 0.7 to 4.6 ms after the step, with steps 2.3 to 30 ms apart). One step's outputs are
then not logged together, and outputs of neighbouring steps interleave, so the steps cannot be
read off the times (steps.py). What still holds: a request that is not preempted makes one
token per step, so its completion is n_out - 1 steps after its first token; and two outputs
logged more than the jitter apart come from different steps, the earlier one first.

So each request's first-token step f_i is a variable, and every such pair of outputs is a
difference constraint between two of them (a simple temporal network): f_q + k_b >= f_r + k_a
+ 1 when output a (request r, k_a steps after its first token) was logged more than the jitter
before output b (request q, k_b); and f_q >= f_r + k_a + 1 when output a was logged before
request q was received (the step that made it had ended before q reached the engine; no
jitter is needed there: an output is logged after its step). Its minimal network (all-pairs
shortest paths) is backtrack-free: taking the requests in the order of their first tokens,
any value within the bounds the ones already taken leave extends to a full solution, so
`assignments` enumerates every solution without a dead end."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from forensics.reconstruct.trace import Req

MOST_REQUESTS = 600  # nodes with more requests are not solved this way
UNBOUNDED = 1 << 40


def _outputs(reqs: list[Req]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every logged output: (time, request, steps after its first token)."""
    t, who, k = [], [], []
    for i, r in enumerate(reqs):
        assert r.first_token_us is not None and r.completed_us is not None
        t += [r.first_token_us, r.completed_us]
        who += [i, i]
        k += [0, max(r.n_out, 1) - 1]
    return np.asarray(t, np.int64), np.asarray(who, np.int64), np.asarray(k, np.int64)


def network(reqs: list[Req], jitter_us: int) -> np.ndarray | None:
    """The minimal network: d[u, v] is the most f_v - f_u can be (UNBOUNDED: no bound); None
    when no steps fit the times with this jitter."""
    n = len(reqs)
    t, who, k = _outputs(reqs)
    d = np.full((n, n), UNBOUNDED, np.int64)
    np.fill_diagonal(d, 0)
    a, b = np.nonzero(t[None, :] - t[:, None] > jitter_us)  # a logged well before b
    # f_who[a] - f_who[b] <= k[b] - k[a] - 1: an edge who[b] -> who[a]
    np.minimum.at(d, (who[b], who[a]), k[b] - k[a] - 1)
    # an output logged before request q was received came from a step before q's first one
    received = np.asarray([r.received_us for r in reqs], np.int64)
    a, q = np.nonzero(t[:, None] < received[None, :])
    np.minimum.at(d, (q, who[a]), -1 - k[a])
    for m in range(n):
        np.minimum(d, np.minimum(d[:, m : m + 1] + d[m : m + 1, :], UNBOUNDED), out=d)
        if d[m, m] < 0:
            return None
    return None if (np.diagonal(d) < 0).any() else d


def least_jitter(reqs: list[Req], most_us: int) -> int | None:
    """The least jitter (microseconds, to 50 us) with which some steps fit the times; None when
    none does up to most_us."""
    if network(reqs, most_us) is None:
        return None
    lo, hi = 0, most_us
    while hi - lo > 50:
        mid = (lo + hi) // 2
        if network(reqs, mid) is None:
            lo = mid
        else:
            hi = mid
    return hi


def first_token_order(reqs: list[Req]) -> list[int]:
    """The order in which assignments takes the requests: by logged first token."""
    return sorted(range(len(reqs)), key=lambda i: (reqs[i].first_token_us or 0, i))


def assignments(
    reqs: list[Req], d: np.ndarray, until: int | None = None, lead: list[int] | None = None
) -> Iterator[list[int]]:
    """Every set of first-token steps that satisfies the network, shifted to start at step 0,
    depth first: each request, in first_token_order, over the steps the ones before it leave.
    A request no earlier one bounds from above (it came after an idle engine) takes its
    earliest step: later ones only shift every step after it.

    With `until` (a position in first_token_order): once the requests up to it are taken, and
    every request not yet taken can only start after the last step they took (its lowest step
    less lead[v], the steps it arrives before its first token), the rest take their lowest
    steps: one assignment stands for every way they could go on, which changes nothing up to
    that step."""
    order = first_token_order(reqs)
    ahead = lead or [0] * len(reqs)
    return (list(f) for f in _every(order, d, until, ahead))


def _bounds(v: int, taken: np.ndarray, f: np.ndarray, d: np.ndarray) -> tuple[int, int, bool]:
    """The steps request v can take given the ones taken: (lowest, highest, bounded above)."""
    if not len(taken):
        return 0, 0, True
    lo = int((f[taken] - d[v, taken]).max())
    hi = int((f[taken] + d[taken, v]).min())
    if lo <= -UNBOUNDED // 2:  # nothing taken bounds it from below
        lo = hi if hi < UNBOUNDED // 2 else 0
    return lo, hi, hi < UNBOUNDED // 2


def _every(
    order: list[int], d: np.ndarray, until: int | None, lead: list[int]
) -> Iterator[tuple[int, ...]]:
    """Every assignment, depth first; past `until`, one for every way the rest could go on
    where none of them can start by the last step taken so far."""
    f = np.zeros(len(order), np.int64)
    sequence = np.asarray(order, np.int64)

    def after(k: int) -> bool:
        """Whether every request from position k on starts after every step taken."""
        taken, last = sequence[:k], int(f[sequence[:k]].max())
        for v in order[k:]:
            lowest = int((f[taken] - d[v, taken]).max())
            if lowest <= -UNBOUNDED // 2 or lowest - lead[v] <= last:
                return False
        return True

    def place(k: int) -> Iterator[tuple[int, ...]]:
        if k == len(order):
            yield tuple((f - f.min()).tolist())
            return
        if until is not None and k > until and after(k):
            for j in range(k, len(order)):
                f[order[j]] = _bounds(order[j], sequence[:j], f, d)[0]
            yield tuple((f - f.min()).tolist())
            return
        v = order[k]
        lo, hi, bounded = _bounds(v, sequence[:k], f, d)
        for x in range(lo, hi + 1 if bounded else lo + 1):
            f[v] = x
            yield from place(k + 1)

    yield from place(0)
