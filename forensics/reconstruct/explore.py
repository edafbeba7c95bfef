"""Which runs of a vLLM unified node's engine scheduler (unified.py) fit its log, and what
their stubs read: the placements of the unlogged steps first, then runs on the clock, and the
placements with the log's doubtful steps taken as the step before's (steps.doubtful), then
first-token steps the times allow with delivery jitter (jitter.py); only consistent runs are
kept, and their exposures are the node's."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

from forensics.base.progress import ProgressFn, no_progress
from forensics.engines.client import EngineAllocators
from forensics.reconstruct.jitter import (
    MOST_PLACEMENTS,
    MOST_REQUESTS,
    TooMany,
    assignments,
    first_token_order,
    least_jitter,
    network,
)
from forensics.reconstruct.runstate import UnifiedRun
from forensics.reconstruct.timed import timed_runs
from forensics.reconstruct.trace import Event, Layout
from forensics.reconstruct.unified import SCHEDULES, UnifiedNode

TIMED_RUNS = 1024  # the most runs on the clock per stub sharing (timed.timed_runs)
MOST_JITTER_US = 1_000_000  # the most delivery jitter looked for (least_jitter)
MOST_ASSIGNMENTS = 2_000_000  # sets of first-token steps enumerated (_jittered); more: none run
MOST_GROUPS = 4_096  # distinct runs up to the stubs' first reads, each run twice; more: none
REPORT_EVERY = 100_000  # assignments enumerated between progress reports


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
    cut: bool = False  # the runs on the clock stopped before every one was made


def explore(
    node: UnifiedNode, drv: EngineAllocators, progress: ProgressFn = no_progress
) -> UnifiedResult:
    """The runs the log leaves open, each with the stub's prompt shared with its account's
    prefix and not: every placement of the unlogged steps (step_layouts), each request
    arriving at the step of its first token; where none of them fits the log (a request held
    back by the seats or the token budget, a chunked prefill), runs on the clock (timed_runs),
    where the scheduler decides when each request runs. The consistent ones are
    kept. Where the steps cannot be read off the times, or no such run fits and a delivery
    jitter is stated, runs over the first-token steps the times allow with it (_jittered)."""
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
            _keep(res, timed_runs(node, drv, s, lambda: res.kept == 0, TIMED_RUNS))
        if res.cut:  # a sample of the runs on the clock: the engine's may be another
            why = f"more than {TIMED_RUNS} runs on the clock per stub sharing; none is kept"
            res = UnifiedResult(res.runs, why=f"{why}, so nothing is cleared", cut=True)
    mergeable = not unstepped or node.split_step()
    if mergeable and not res.cut and not _merged(res, node, drv, shared):
        res = UnifiedResult(
            res.runs,
            why=f"more than {SCHEDULES} decode-block schedules fit "
            "the log with its doubtful steps merged, so nothing is cleared",
        )
    if not res.kept and (unstepped or node.jitter_us is not None):
        _jittered(res, node, drv, shared, progress)
    elif res.kept and node.jitter_us is not None:  # the stated bound left the steps marked
        res.note = (
            f"the logged times mark the steps under the stated {node.jitter_us / 1000:.1f} ms "
            "of delivery jitter (--delivery-jitter-ms), below the gap between logged steps"
        )
    res.consistent = res.kept > 0
    return res


def _merged(
    res: UnifiedResult, node: UnifiedNode, drv: EngineAllocators, shared: tuple[bool, ...]
) -> bool:
    """The runs of the node with its doubtful logged steps (steps.doubtful) taken as one,
    every set of them, kept beside the others: where an output logged apart from its step
    reads as a step of its own, the engine's run is among these. False where a set gives more
    schedules than are run."""
    variants = node.merged_variants()
    for alt in variants:
        if alt.unstepped() or alt.unplaced():
            continue  # no count of steps fits with these merged
        schedules = alt.schedules(SCHEDULES)
        if len(schedules) > SCHEDULES:
            return False
        res.ambiguous += len(schedules)
        _keep(res, (alt.run(drv, gaps, s, res.kept == 0) for gaps in schedules for s in shared))
    if variants:
        res.note = "; ".join(
            n
            for n in (
                res.note,
                f"{len(node.doubtful)} logged step(s) closer to the one before than a "
                "third of a token's time, each also run as the step before's outputs logged apart "
                f"({len(variants)} more step layouts)",
            )
            if n
        )
    return True


def _jittered(
    res: UnifiedResult,
    node: UnifiedNode,
    drv: EngineAllocators,
    shared: tuple[bool, ...],
    progress: ProgressFn = no_progress,
) -> None:
    """Where the logged times do not mark the steps (a gateway in front of the engine's server
    logs each output milliseconds after its step, with a delay of its own: jitter.py), runs
    over every set of first-token steps that fits the logged times with the delivery jitter
    stated for the node (node.jitter_us, --delivery-jitter-ms). How late an output can be
    logged is not in the log: the least jitter that lets any steps fit is only a floor, and
    under load the engine's own steps needed more than six times it (docs/measurements/
    real-vllm.md). So without a stated jitter, or with one below that floor, nothing is run
    and the node clears nobody; its reason says what the log needs. A stub's exposures
    depend only on the run up to its first read, so the assignments are grouped by what
    reaches the scheduler up to the last stub's first step (UnifiedNode.order_key) and one of
    each group is run that far, each stub sharing its account's prefix and not; a run must
    give every request its logged prefix-cache hits and its first token and completion
    n_out - 1 steps apart where they fall in that stretch. Requests that can only start after
    the stubs' first reads are taken at their earliest steps (jitter.assignments). Every group
    is run, or none: beyond MOST_ASSIGNMENTS assignments, MOST_GROUPS groups or
    MOST_PLACEMENTS steps tried (jitter.TooMany) the node is left unexplored and clears
    nobody, since a union over a sample can miss the run the engine made."""
    reqs = node.reqs
    stubs = [i for i, r in enumerate(reqs) if r.stub]
    if not stubs:  # no read to rebuild: nothing would be found or cleared
        return
    least = least_jitter(reqs, MOST_JITTER_US) if len(reqs) <= MOST_REQUESTS else None
    if least is None:
        return
    jitter = node.jitter_us
    if jitter is None or jitter < least:
        res.why = "; ".join(why for why in (res.why, _unstated(least, jitter)) if why)
        return
    d = network(reqs, jitter)
    assert d is not None  # at least the least jitter that fits
    groups: dict[tuple[object, ...], tuple[list[int], int]] = {}
    seen = 0
    order = first_token_order(reqs)
    last_stub = max(order.index(i) for i in stubs)
    many = ""
    try:
        for first in assignments(
            reqs,
            d,
            last_stub,
            node.leads,
            MOST_PLACEMENTS,
            lambda n: progress("first-token steps tried", n, MOST_PLACEMENTS),
        ):
            seen += 1
            if not seen % REPORT_EVERY:
                progress("sets of engine steps the jittered times allow", seen, None)
            until = max(first[i] for i in stubs)
            key = node.order_key(first, until)
            if key is not None:
                groups.setdefault(key, (first, until))
            if seen > MOST_ASSIGNMENTS or len(groups) > MOST_GROUPS:
                many = (
                    f"more than {MOST_ASSIGNMENTS:,} sets of first-token steps"
                    if seen > MOST_ASSIGNMENTS
                    else f"more than {MOST_GROUPS:,} distinct runs"
                )
                break
    except TooMany:
        many = f"more first-token steps to try than {MOST_PLACEMENTS:,}"
    if many:
        res.why = (
            f"{many} with {jitter / 1000:.1f} ms of delivery jitter; none was run, so "
            "nothing is cleared"
        )
        return
    if not groups:
        res.why = (
            f"no engine steps that fit the logged times with {jitter / 1000:.1f} ms of delivery "
            "jitter keep within the logged seats and token budget"
        )
        return
    for k, (first, until) in enumerate(groups.values()):
        if not k % 64:
            progress("runs on the engine's scheduler", k, len(groups))
        _keep(res, (node.run_assigned(drv, first, s, res.kept == 0, until) for s in shared))
    res.note = (
        f"steps from the logged times with the stated {jitter / 1000:.1f} ms of delivery "
        "jitter (--delivery-jitter-ms): "
        f"{seen:,} sets of first-token steps enumerated, {len(groups):,} distinct up to the "
        "stubs' first reads within the seats and the token budget, all run"
    )


def _unstated(least: int, stated: int | None) -> str:
    """Why a node whose times do not mark its steps clears nobody without a usable jitter."""
    floor = (
        f"steps that fit the logged times need at least {least / 1000:.1f} ms of delivery jitter"
    )
    if stated is None:
        return (
            f"{floor}, and how much more the log cannot tell: nothing is cleared "
            "(--delivery-jitter-ms rebuilds the node under a stated bound)"
        )
    return f"{floor}, more than the stated {stated / 1000:.1f} ms; nothing is cleared"


def _keep(res: UnifiedResult, runs_: Iterator[UnifiedRun]) -> None:
    """Count the runs and keep the consistent ones' exposures and layouts (the first one's
    events)."""
    for run in runs_:
        if run.cut:
            res.cut = True
            continue
        if run.same:  # another run made elsewhere
            continue
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
