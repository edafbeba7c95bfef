"""Which runs of a vLLM unified node's engine scheduler (unified.py) fit its log, and what
their stubs read: the placements of the unlogged steps first, then runs on the clock, then
first-token steps the times allow with delivery jitter (jitter.py); only consistent runs are
kept, and their exposures are the node's."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

from forensics.engines.client import EngineAllocators
from forensics.reconstruct.jitter import MOST_REQUESTS, assignments, least_jitter, network
from forensics.reconstruct.runstate import UnifiedRun
from forensics.reconstruct.trace import Event, Layout
from forensics.reconstruct.unified import SCHEDULES, UnifiedNode

TIMED_RUNS = 128  # the most runs on the clock per stub sharing (timed_runs)
JITTER_RUNS = (128, 2048)  # runs over drawn first-token steps: at least, at most
MOST_JITTER_US = 1_000_000  # the most delivery jitter looked for (least_jitter)


@dataclass
class UnifiedResult:
    runs: int = 0
    kept: int = 0
    consistent: bool = False
    exposures: Counter[tuple[int, int]] = field(default_factory=Counter)
    tokens: dict[tuple[int, int], int] = field(default_factory=dict)
    layouts: dict[int, Counter[Layout]] = field(default_factory=dict)
    events: list[Event] = field(default_factory=list)
    why: str = ""
    ambiguous: int = 0
    note: str = ""  # how the runs' steps were found, where not read off the log


def explore(node: UnifiedNode, drv: EngineAllocators) -> UnifiedResult:
    """The runs the log leaves open, each with the stub's prompt shared with its account's
    prefix and not: every placement of the unlogged steps (step_layouts), each request
    arriving at the step of its first token; where none of them fits the log (a request held
    back by the seats or the token budget, a chunked prefill), runs on the clock (timed_runs),
    where the scheduler decides when each request runs. The consistent ones are
    kept. Where the steps cannot be read off the times, or no such run fits, runs over the
    first-token steps the times allow with delivery jitter (_jittered)."""
    res = UnifiedResult()
    res.why = node.missing()
    if res.why:
        return res
    unstepped = node.unstepped()
    schedules = node.schedules(SCHEDULES) if not unstepped and not node.unplaced() else []
    res.ambiguous = max(len(schedules) - 1, 0)
    if len(schedules) > SCHEDULES:
        res.why = f"more than {SCHEDULES} decode-block schedules fit the log"
        return res
    res.why = unstepped or node.unplaced()
    shared = (True, False) if any(r.stub for r in node.reqs) else (True,)
    _keep(res, (node.run(drv, gaps, s, res.kept == 0) for gaps in schedules for s in shared))
    if not res.kept and not unstepped:
        for s in shared:
            _keep(res, node.timed_runs(drv, s, lambda: res.kept == 0, TIMED_RUNS))
    if not res.kept:
        _jittered(res, node, drv, shared)
    res.consistent = res.kept > 0 and not res.note.endswith("did not settle")
    return res


def _jittered(
    res: UnifiedResult, node: UnifiedNode, drv: EngineAllocators, shared: tuple[bool, ...]
) -> None:
    """Where no run fits the logged steps (a gateway in front of the engine's server logs each
    output milliseconds after its step, with a delay of its own: jitter.py), runs whose
    first-token steps are drawn from those that fit the logged times with three times the least
    jitter that lets any fit (at least 2 ms); each must still give every request its logged
    prefix-cache hits, first token and completion n_out - 1 steps apart. Their exposures are
    the union over the orders the times leave open: all of them where they are few
    (jitter.EVERY), else a sample, drawn until the union has not grown in the last half of the
    runs (at least JITTER_RUNS[0]); where it still grows after JITTER_RUNS[1], it has not
    settled and the node clears nobody."""
    reqs = node.reqs
    least = least_jitter(reqs, MOST_JITTER_US) if len(reqs) <= MOST_REQUESTS else None
    if least is None:
        return
    jitter = max(3 * least, 2000)
    d = network(reqs, jitter)
    assert d is not None  # more jitter than the least that fits
    fewest, most = JITTER_RUNS
    every, firsts = assignments(reqs, d, seed=len(reqs))
    drawn = grew = k = 0
    for f in firsts:
        drawn += 1
        for s in shared:
            before = len(res.exposures)
            _keep(res, iter([node.run_assigned(drv, f, s, res.kept == 0)]))
            k += 1
            grew = k if len(res.exposures) > before else grew
        if not every and ((k >= fewest and k >= 2 * grew) or k >= most):
            break
    settled = "settled" if every or k >= 2 * grew else "did not settle"
    res.note = (
        f"steps from the logged times with {jitter / 1000:.1f} ms of delivery jitter "
        + (f"(all {drawn} assignments)" if every else f"({drawn} assignments drawn)")
        + (f"; the union of their exposures {settled}" if res.kept else "; none fits")
    )


def _keep(res: UnifiedResult, runs_: Iterator[UnifiedRun]) -> None:
    """Count the runs and keep the consistent ones' exposures and layouts (the first one's
    events)."""
    for run in runs_:
        res.runs += 1
        if not run.ok:
            res.why = res.why or run.why
            continue
        if not res.kept:
            res.events = run.events
        res.kept += 1
        for pair, n in run.exposures.items():
            res.exposures[pair] += 1
            res.tokens[pair] = max(res.tokens.get(pair, 0), n)
        for receiver, layout in run.layouts.items():
            res.layouts.setdefault(receiver, Counter())[layout] += 1
