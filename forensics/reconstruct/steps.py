"""The engine's steps as the gateway log shows them, for a vLLM unified node.

vLLM v1 runs in steps; the gateway logs a request's first token after the step that prefilled
it and its completion after the step that sampled its last token. One step's outputs are logged
microseconds apart, steps milliseconds apart (merge_gap). A request has as many steps as output
tokens, so the steps the log does not show are counted into the gaps between logged steps
(step_layouts: every count that fits every request)."""

from __future__ import annotations

import bisect

import numpy as np

from forensics.reconstruct.trace import Req


def decoding(reqs: list[Req]) -> list[tuple[int, int, int]]:
    """Per request with two output tokens or more: (first token, completion, the logged time
    per output token after the first), in microseconds."""
    return [
        (r.first_token_us, r.completed_us, (r.completed_us - r.first_token_us) // (r.n_out - 1))
        for r in reqs
        if r.first_token_us is not None and r.completed_us is not None and r.n_out > 1
    ]


def merge_gap(reqs: list[Req], most_us: int) -> int:
    """How close two logged times must be to be one step's. One step's outputs are logged one
    after another (microseconds apart), steps a model's forward pass apart (milliseconds): the
    first gap between logged times at least ten times the largest one below it, and at most
    most_us and a quarter of the shortest step a request's own times imply."""
    cap = max(1, min([most_us, *(s // 4 for *_, s in decoding(reqs) if s > 0)]))
    times = sorted({t for r in reqs for t in (r.first_token_us, r.completed_us) if t is not None})
    below = 0
    for gap in sorted({b - a for a, b in zip(times, times[1:], strict=False)} - {0}):
        if gap >= cap:
            break
        if below and gap >= 10 * below:
            return gap
        below = gap
    return cap


def shows_steps(reqs: list[Req], merge_us: int) -> bool:
    """Whether the logged times mark the engine's steps when merged at merge_us: some outputs
    logged together (closer than merge_us), none of them more than a tenth of it apart, and
    the times fine enough to tell (a log to the millisecond makes outputs of neighbouring
    steps look simultaneous). An engine's own per-step times give this; a gateway in front
    of the engine's server logs each output with a delay of its own, its times spread over
    the steps, and steps read off them would rest on a guess of how late each was logged."""
    times = sorted(t for r in reqs for t in (r.first_token_us, r.completed_us) if t is not None)
    within = [b - a for a, b in zip(times, times[1:], strict=False) if b - a < merge_us]
    return bool(within) and 10 * max(max(within), resolution(times)) <= merge_us


def resolution(times: list[int]) -> int:
    """The coarsest of 1 us, 10 us, ... 1 s that every time is a multiple of."""
    step = 1
    while step < 1_000_000 and all(t % (step * 10) == 0 for t in times):
        step *= 10
    return step


def steps(reqs: list[Req], merge_us: int) -> list[int]:
    """The logged steps' times: first tokens and completions, merged when closer than
    merge_us (one step's outputs are logged one after another)."""
    times = sorted({t for r in reqs for t in (r.first_token_us, r.completed_us) if t is not None})
    out: list[int] = []
    for t in times:
        if not out or t - out[-1] >= merge_us:
            out.append(t)
    return out


def doubtful(reqs: list[Req], clusters: list[int]) -> list[int]:
    """The boundaries between logged steps k and k + 1 (k listed) that may be one step's
    outputs logged apart: step k + 1 came sooner after step k than a third of the shortest
    time per output token of the requests decoding across the boundary. A process held up
    while it logs one step's outputs (a loaded machine) puts the rest milliseconds after the
    others, and they then read as a step of their own: seen on a real vLLM, a 187-token
    prefill 1.4 ms after the step before, where the requests took 5.7 ms per token; the
    rebuild prefilled the request a step late and cleared the stub's true leakers. A first
    token or a completion so delayed moves a prefill or a free a step late alike (on real
    runs each delayed by 1.4 ms: the stub's first token, another request's first token
    after a 128-token prefix hit, a completion), so any logged step that close is doubtful,
    whatever it logs. Taking a real short step as doubtful costs only the runs it adds; a
    delay as long as a step is not told from one (only --delivery-jitter-ms covers it)."""
    times = sorted({t for r in reqs for t in (r.first_token_us, r.completed_us) if t is not None})
    per_token = decoding(reqs)
    longest = max((s for *_, s in per_token), default=0)
    out = []
    for k in range(len(clusters) - 1):
        end = times[bisect.bisect_left(times, clusters[k + 1]) - 1]
        gap = clusters[k + 1] - end
        if 3 * gap >= longest:
            continue
        across = [s for a, b, s in per_token if a <= end and b >= clusters[k + 1]]
        if across and 3 * gap < min(across):
            out.append(k)
    return out


def _step_of(clusters: list[int], t: int) -> int:
    """Index of the logged step holding time t (the last one at or before it)."""
    return max(int(np.searchsorted(clusters, t, side="right")) - 1, 0)


def spans(reqs: list[Req], clusters: list[int]) -> list[tuple[int, int, int]] | None:
    """Per request, (logged step of its first token, of its completion, steps between them
    that no event logged); None when a request spans more logged steps than it has output
    tokens (preempted, or the steps are not the engine's)."""
    out = []
    for r in reqs:
        if r.first_token_us is None or r.completed_us is None:
            return None
        a, b = _step_of(clusters, r.first_token_us), _step_of(clusters, r.completed_us)
        d = max(r.n_out - 1, 0) - (b - a)
        if d < 0:
            return None
        out.append((a, b, d))
    return out


def step_layouts(sp: list[tuple[int, int, int]], n_clusters: int, limit: int) -> list[list[int]]:
    """Every way (up to limit + 1 of them) to put unlogged steps between the logged ones so
    that each request has exactly as many steps as output tokens: per gap between logged steps
    i and i+1, the unlogged steps in it. A gap no request spans gets none (nothing decodes)."""
    n = max(n_clusters - 1, 0)
    if any(a == b and d for a, b, d in sp):
        return []  # more tokens than the one logged step it has
    cover: list[list[int]] = [[] for _ in range(n)]
    ending: list[list[int]] = [[] for _ in range(n)]
    for j, (a, b, _) in enumerate(sp):
        for g in range(a, b):
            cover[g].append(j)
        if b > a:
            ending[b - 1].append(j)
    left = [d for _, _, d in sp]
    most = [0] * n
    gaps = [-1] * n  # the unlogged steps tried at each gap; -1: not entered
    out: list[list[int]] = []
    g = 0
    while g >= 0 and len(out) <= limit:  # depth first, without recursion
        if g == n:
            out.append(list(gaps))
            g -= 1
            continue
        if gaps[g] < 0:
            most[g] = min((left[j] for j in cover[g]), default=0)
        else:
            for j in cover[g]:
                left[j] += gaps[g]
        gaps[g] += 1
        if gaps[g] > most[g]:
            gaps[g] = -1
            g -= 1
            continue
        for j in cover[g]:
            left[j] -= gaps[g]
        if all(left[j] == 0 for j in ending[g]):
            g += 1
    return out


def index_of(gaps: list[int]) -> list[int]:
    """The engine step of each logged step, given the unlogged steps in each gap."""
    index = [0]
    for e in gaps:
        index.append(index[-1] + 1 + e)
    return index
