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
any value within the bounds the ones already taken leave extends to a full solution.

The network alone leaves a request that nothing logged bounds on one side free to go
arbitrarily far that way (behind a stalled server, most requests), and the engine's run is
not the one at its earliest step. What bounds it is that an engine with nothing in flight runs
no step: numbered as the engine numbers them, the steps from the first arrival to the last
output each have a request in flight. `assignments` gives every solution with no idle step,
the engine's own among them, and tells when there are more than it may try (TooMany)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np

from forensics.reconstruct.trace import Req

MOST_REQUESTS = 600  # nodes with more requests are not solved this way
MOST_PLACEMENTS = 2_000_000  # steps tried for one request or another (assignments); more: TooMany
REPORT_EVERY = 100_000  # placements tried between reports (assignments' tried)
UNBOUNDED = 1 << 40


class TooMany(Exception):
    """More placements tried than assignments was allowed: the assignments given so far are
    not all there are."""


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
    reqs: list[Req],
    d: np.ndarray,
    until: int | None = None,
    lead: list[int] | None = None,
    most: int = MOST_PLACEMENTS,
    tried: Callable[[int], None] | None = None,
) -> Iterator[list[int]]:
    """Every set of first-token steps that satisfies the network and leaves no engine step
    idle between the first arrival and the last output (an engine with nothing in flight runs
    no step, so the engine's own steps are such a set), shifted to start at step 0, depth
    first: each request, in first_token_order, over the steps the ones before it leave. Where
    nothing taken bounds a request from one side, its steps are bounded by how many idle steps
    the requests not yet taken could fill.

    With `until` (a position in first_token_order): once the requests up to it are taken, and
    every request not yet taken can only start after the last step they took (its lowest step
    less lead[v], the steps it arrives before its first token), the rest take their lowest
    steps: one assignment stands for every way they could go on, which changes nothing up to
    that step.

    Raises TooMany once more than `most` steps were tried for one request or another;
    tried(n), where given, hears every REPORT_EVERY of them."""
    order = first_token_order(reqs)
    ahead = np.asarray(lead or [0] * len(reqs), np.int64)
    outs = np.asarray([max(r.n_out, 1) for r in reqs], np.int64)
    return (list(f) for f in _every(order, d, until, ahead, outs, most, tried))


def _idle(f: np.ndarray, lead: np.ndarray, outs: np.ndarray, who: np.ndarray) -> np.ndarray:
    """Per step from the first arrival of the requests `who` to their last output: whether
    none of them is in flight (arrived, last output not yet made)."""
    first, last = f[who] - lead[who], f[who] + outs[who] - 1
    low = int(first.min())
    flight = np.zeros(int(last.max()) - low + 2, np.int64)
    np.add.at(flight, first - low, 1)
    np.add.at(flight, last - low + 1, -1)
    return np.cumsum(flight)[:-1] == 0


def _fillable(  # noqa: PLR0913
    f: np.ndarray, d: np.ndarray, taken: np.ndarray, rest: np.ndarray, lead: np.ndarray,
    outs: np.ndarray, spare: int,
) -> bool:  # fmt: skip
    """Whether the requests not yet taken could fill every idle step among the ones taken:
    no more idle steps than they span, and each idle step within the steps some one of them
    can reach (between its lowest arrival and its highest last output the network allows)."""
    idle = _idle(f, lead, outs, taken)
    if not idle.any():
        return True
    if int(idle.sum()) > spare:
        return False
    steps = np.flatnonzero(idle) + int((f[taken] - lead[taken]).min())
    lo = (f[taken][None, :] - d[rest][:, taken]).max(axis=1) - lead[rest]
    hi = np.minimum((f[taken][None, :] + d[taken][:, rest].T).min(axis=1), UNBOUNDED)
    hi = hi + outs[rest] - 1
    reached = (lo[None, :] <= steps[:, None]) & (steps[:, None] <= hi[None, :])
    return bool(reached.any(axis=1).all())


def _reach(
    v: int, taken: np.ndarray, f: np.ndarray, d: np.ndarray, spare: int, lead: np.ndarray,
    outs: np.ndarray,
) -> range:  # fmt: skip
    """The steps request v can take given the ones taken: within the network's bounds, and
    no further from the taken ones' steps than the `spare` steps the requests not yet taken
    span could fill (any further leaves a step with nothing in flight between them)."""
    if not len(taken):
        return range(0, 1)
    lo = int((f[taken] - d[v, taken]).max())
    hi = int((f[taken] + d[taken, v]).min())
    first = int((f[taken] - lead[taken]).min())
    last = int((f[taken] + outs[taken] - 1).max())
    lo = max(lo, first - int(outs[v]) - spare)  # v's last output within reach before them
    hi = min(hi, last + 1 + int(lead[v]) + spare)  # v's arrival within reach after them
    return range(lo, hi + 1)


def _every(  # noqa: PLR0913
    order: list[int],
    d: np.ndarray,
    until: int | None,
    lead: np.ndarray,
    outs: np.ndarray,
    most: int,
    tried: Callable[[int], None] | None,
) -> Iterator[tuple[int, ...]]:
    """Every assignment, depth first; past `until`, one for every way the rest could go on
    where none of them can start by the last step taken so far. A placement that leaves more
    idle steps among the ones taken than the requests not yet taken span is not followed."""
    f = np.zeros(len(order), np.int64)
    work = [0]
    sequence = np.asarray(order, np.int64)
    spans = (lead + outs)[sequence]
    spare = (np.cumsum(spans[::-1])[::-1] - spans).tolist()  # spanned by the ones after k

    def after(k: int) -> bool:
        """Whether every request from position k on starts after every step taken."""
        taken, last = sequence[:k], int((f[sequence[:k]] + outs[sequence[:k]] - 1).max())
        for v in order[k:]:
            lowest = int((f[taken] - d[v, taken]).max())
            if lowest <= -UNBOUNDED // 2 or lowest - lead[v] <= last:
                return False
        return True

    def rest(k: int) -> tuple[int, ...] | None:
        """The requests from position k on at their lowest steps, after the ones taken, with
        the idle steps between them dropped; None if the ones taken leave a step idle."""
        if _idle(f, lead, outs, sequence[:k]).any():
            return None
        for j in range(k, len(order)):
            taken = sequence[:j]
            f[order[j]] = int((f[taken] - d[order[j], taken]).max())
        idle = _idle(f, lead, outs, sequence)
        low = int((f - lead).min())
        shut = np.concatenate(([0], np.cumsum(idle)))[f - low]  # idle steps before each
        g = f - shut
        return tuple((g - g.min()).tolist())

    def place(k: int) -> Iterator[tuple[int, ...]]:
        if k == len(order):
            if not _idle(f, lead, outs, sequence).any():
                yield tuple((f - f.min()).tolist())
            return
        if until is not None and k > until and after(k):
            ended = rest(k)
            if ended is not None:
                yield ended
            return
        v = order[k]
        for x in _reach(v, sequence[:k], f, d, spare[k], lead, outs):
            f[v] = x
            work[0] += 1
            if work[0] > most:
                raise TooMany(most)
            if tried is not None and not work[0] % REPORT_EVERY:
                tried(work[0])
            if _fillable(f, d, sequence[: k + 1], sequence[k + 1 :], lead, outs, spare[k]):
                yield from place(k + 1)

    yield from place(0)
