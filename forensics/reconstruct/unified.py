"""A vLLM unified node's blocks rebuilt from the request log, on vLLM's own KV cache manager.

vLLM v1 schedules in steps: each step first gives the running requests the blocks their next
token needs, then schedules waiting requests (first come, first served), and after the model
ran frees the blocks of every request that finished. The gateway logs a request's first token
after the step that prefilled it and its completion after the step that sampled its last
token; one step's outputs are logged microseconds apart, steps milliseconds apart (merge_gap).
Within one logged step the order is: decode blocks, then new requests in arrival order, then
frees in completion order.

Per request (forensics/engines/allocator_driver.py, `vllm-cache`):

- scheduled at its first token: `get_computed_blocks` finds its prefix-cache hits, and
  `allocate_slots` takes the rest of its prompt's blocks from the free queue's head. The log
  has no contents, so prompts are synthesized: the first p blocks of every prompt of an
  account are the account's shared prefix, the rest its own. p is chosen per request, when it
  is scheduled, as the first of (the account's longest logged hit, the request's own logged
  hit) with which the real manager reproduces the request's logged `cached_tokens`;
- a decode step per output token but the last. A request has as many steps as output tokens,
  so the steps the log does not show are counted into the gaps between logged steps
  (step_layouts: every count that fits every request), and each distinct placement of the
  decode steps that need a new block is a run;
- freed at completion (`free`: reverse order; uncached blocks go to the queue's head, cached
  ones to its tail, hashable until popped);
- a stub (screening's stub reasons) takes fresh blocks for its whole prompt without a lookup,
  as forensics/tap/vllm_faults.py makes it: its first read covers positions 0 .. prompt-2 of
  those blocks, and their last writers are its exposures. Whether its own prompt shared the
  account's prefix (so that its blocks were cached under the prefix's hashes) is explored.

A run is consistent with the log when every request was scheduled and grown without running
out of blocks and every request but the stubs had exactly its logged prefix-cache hits; only
consistent runs are kept (none kept: the node is marked inconsistent and clears nothing)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from forensics.engines.client import EngineAllocators
from forensics.reconstruct.trace import Event, Layout, Req, runs

ADMIT, DECODE, FREE = 1, 0, 2  # phases within a step: decode blocks, new requests, frees
AFTER = 3  # a decode step between two logged steps: after the earlier one's frees
STEP_LAYOUTS = 20_000  # the most placements of unlogged steps enumerated
MAX_STEPS = 5_000  # logged steps of a node explored; more: none kept
SCHEDULES = 128  # the most distinct decode-block schedules they give, run; more: none kept


@dataclass
class UnifiedRun:
    ok: bool = True
    why: str = ""
    exposures: dict[tuple[int, int], int] = field(default_factory=dict)
    layouts: dict[int, Layout] = field(default_factory=dict)
    events: list[Event] = field(default_factory=list)
    hits: dict[int, int] = field(default_factory=dict)


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


def merge_gap(reqs: list[Req], most_us: int) -> int:
    """How close two logged times must be to be one step's. One step's outputs are logged one
    after another (microseconds apart), steps a model's forward pass apart (milliseconds): the
    first gap between logged times at least ten times the largest one below it, and at most
    most_us and a quarter of the shortest step a request's own times imply."""
    spans = [
        (r.completed_us - r.first_token_us) // (r.n_out - 1)
        for r in reqs
        if r.first_token_us is not None and r.completed_us is not None and r.n_out > 1
    ]
    cap = max(1, min([most_us, *(s // 4 for s in spans if s > 0)]))
    times = sorted({t for r in reqs for t in (r.first_token_us, r.completed_us) if t is not None})
    below = 0
    for gap in sorted({b - a for a, b in zip(times, times[1:], strict=False)} - {0}):
        if gap >= cap:
            break
        if below and gap >= 10 * below:
            return gap
        below = gap
    return cap


def steps(reqs: list[Req], merge_us: int) -> list[int]:
    """The logged steps' times: first tokens and completions, merged when closer than
    merge_us (one step's outputs are logged one after another)."""
    times = sorted({t for r in reqs for t in (r.first_token_us, r.completed_us) if t is not None})
    out: list[int] = []
    for t in times:
        if not out or t - out[-1] >= merge_us:
            out.append(t)
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


def prompt_tokens(acct: int, i: int, prompt: int, shared_blocks: int, ps: int) -> list[int]:
    """A synthesized prompt: the account's shared prefix for `shared_blocks` blocks, then
    tokens of this request's own (ids no other prompt uses)."""
    n = min(shared_blocks * ps, prompt)
    return [(acct + 1) * 1_000_000 + p for p in range(n)] + [
        (1 << 32) + i * 100_000 + p for p in range(n, prompt)
    ]


class UnifiedNode:
    """The runs of one node, on fresh vllm-cache pools of one driver."""

    def __init__(self, node: str, reqs: list[Req], ps: int, n_blocks: int, merge_us: int):
        self.node, self.reqs, self.ps, self.n_blocks = node, reqs, ps, n_blocks
        self.clusters = steps(reqs, merge_gap(reqs, merge_us))
        accounts = sorted({r.account_id for r in reqs})
        self.acct = [accounts.index(r.account_id) for r in reqs]
        self.longest: dict[int, int] = {}  # account -> longest logged hit, in blocks
        for i, r in enumerate(reqs):
            if not r.stub and r.cached_tokens:
                a = self.acct[i]
                self.longest[a] = max(self.longest.get(a, 0), r.cached_tokens // ps)
        self.spans = spans(reqs, self.clusters)
        self.layouts = (
            step_layouts(self.spans or [], len(self.clusters), STEP_LAYOUTS)
            if len(self.clusters) <= MAX_STEPS
            else []
        )

    def schedules(self, most: int) -> list[dict[tuple[int, int], tuple[int, int]]]:
        """Per step layout, where each decode step that needs a new block falls: (request,
        decode step k) -> (logged step, DECODE: at it | AFTER: after it); duplicates dropped,
        and no more than most + 1 of them (more are not run)."""
        out: list[dict[tuple[int, int], tuple[int, int]]] = []
        seen: set[tuple[tuple[tuple[int, int], tuple[int, int]], ...]] = set()
        for gaps in self.layouts:
            if len(out) > most:
                break
            index = [0]
            for e in gaps:
                index.append(index[-1] + 1 + e)
            where: dict[tuple[int, int], tuple[int, int]] = {}
            for i, r in enumerate(self.reqs):
                a = self.spans[i][0] if self.spans else 0
                for q in range(-(-r.prompt // self.ps) * self.ps, r.prompt + r.n_out - 1, self.ps):
                    k = q - r.prompt + 1  # the decode step that computes position q
                    at = int(np.searchsorted(index, index[a] + k, side="right")) - 1
                    where[(i, k)] = (at, DECODE if index[at] == index[a] + k else AFTER)
            key = tuple(sorted(where.items()))
            if key not in seen:
                seen.add(key)
                out.append(where)
        return out

    def missing(self) -> str:
        """Why the log cannot be checked against the manager, or ''."""
        for r in self.reqs:
            if r.first_token_us is None or r.completed_us is None:
                return f"{r.request_id} has no first token or completion in the log"
            if r.cached_tokens is None and not r.stub:
                return f"{r.request_id} has no cached_tokens in the log"
        if len(self.clusters) > MAX_STEPS:
            return f"{len(self.clusters)} logged steps, more than {MAX_STEPS} are not explored"
        if self.spans is None:
            return "a request spans more logged steps than it has output tokens (preempted?)"
        if not self.layouts:
            return "no count of unlogged steps gives every request its output tokens"
        if len(self.layouts) > STEP_LAYOUTS:
            return f"more than {STEP_LAYOUTS} ways to place the unlogged steps"
        return ""

    def ops(
        self, where: dict[tuple[int, int], tuple[int, int]]
    ) -> list[tuple[int, int, int, int, int]]:
        """(logged step, phase, time, request, decode steps done by then), in order."""
        out: list[tuple[int, int, int, int, int]] = []
        for i, r in enumerate(self.reqs):
            assert r.first_token_us is not None and r.completed_us is not None
            a = _step_of(self.clusters, r.first_token_us)
            b = _step_of(self.clusters, r.completed_us)
            out.append((a, ADMIT, r.received_us, i, 0))
            for (j, k), (c, phase) in where.items():
                if j == i:
                    out.append((c, phase, r.first_token_us, i, k))
            out.append((b, FREE, r.completed_us, i, max(r.n_out - 1, 0)))
        return sorted(out)

    def run(
        self,
        drv: EngineAllocators,
        where: dict[tuple[int, int], tuple[int, int]],
        stub_shared: bool,
        events: bool,
    ) -> UnifiedRun:
        ps, reqs = self.ps, self.reqs
        pool = drv.new_pool("vllm-cache", self.n_blocks, ps, False)
        writer = np.full(self.n_blocks * ps, -1, np.int64)
        wpos = np.full(self.n_blocks * ps, -1, np.int64)
        blocks: dict[int, list[int]] = {}
        done_steps: dict[int, int] = {}
        out = UnifiedRun()
        for _step, phase, t, i, k in self.ops(where):
            r, rid = reqs[i], f"r{i}"
            if phase == ADMIT:
                got = self._admit(drv, pool, i, stub_shared)
                if got is None:
                    return UnifiedRun(ok=False, why=f"{r.request_id} found too few free blocks")
                hits, ids = got
                out.hits[i] = hits
                if not r.stub and hits != r.cached_tokens:
                    return UnifiedRun(
                        ok=False,
                        why=f"{r.request_id}: {hits} hit tokens, the log {r.cached_tokens}",
                    )
                blocks[i] = ids
                done_steps[i] = 0
                self._emit(out, events, t, r, "alloc", ids, 0, len(ids) * ps)
                if r.stub:
                    self._read(out, i, writer, wpos, np.asarray(ids, np.int64))
                    self._emit(out, events, t, r, "read", ids, 0, r.prompt)
                continue
            while done_steps[i] < k:  # DECODE: steps up to k; FREE: all, then free
                extra = drv.decode(pool, rid)
                if extra is None:
                    return UnifiedRun(ok=False, why=f"{r.request_id} ran out of blocks")
                if extra:
                    self._emit(
                        out, events, t, r, "alloc", extra, 0, len(extra) * ps, first=len(blocks[i])
                    )
                blocks[i] += extra
                done_steps[i] += 1
            if phase == FREE:
                self._write(writer, wpos, i, np.asarray(blocks[i], np.int64), out.hits[i])
                self._emit(out, events, t, r, "free", blocks[i], 0, len(blocks[i]) * ps)
                drv.finish(pool, rid)
        return out

    def _admit(
        self, drv: EngineAllocators, pool: int, i: int, stub_shared: bool
    ) -> tuple[int, list[int]] | None:
        r, ps = self.reqs[i], self.ps
        full = min(self.longest.get(self.acct[i], 0), r.prompt // ps)
        if r.stub:
            shared = full if stub_shared else 0
            return drv.schedule(
                pool, f"r{i}", True, prompt_tokens(self.acct[i], i, r.prompt, shared, ps)
            )
        want = (r.cached_tokens or 0) // ps
        tried = []
        for shared in dict.fromkeys((full, want)):
            tokens = prompt_tokens(self.acct[i], i, r.prompt, shared, ps)
            tried.append(tokens)
            if drv.peek(pool, tokens) == r.cached_tokens:
                return drv.schedule(pool, f"r{i}", False, tokens)
        return drv.schedule(pool, f"r{i}", False, tried[0])

    def _write(
        self, writer: np.ndarray, wpos: np.ndarray, i: int, ids: np.ndarray, hits: int
    ) -> None:
        """What request i left in its blocks: the prompt it computed, its decode steps."""
        r, ps = self.reqs[i], self.ps
        p0 = r.prompt - 1 if r.stub else hits
        end = min(r.prompt + max(r.n_out - 1, 0), len(ids) * ps)
        pos = np.arange(p0, end)
        slots = ids[pos // ps] * ps + pos % ps
        writer[slots] = i
        wpos[slots] = pos

    def _read(
        self, out: UnifiedRun, i: int, writer: np.ndarray, wpos: np.ndarray, ids: np.ndarray
    ) -> None:
        r, ps = self.reqs[i], self.ps
        pos = np.arange(0, r.prompt - 1)
        slots = ids[pos // ps] * ps + pos % ps
        w = writer[slots]
        out.layouts[i] = tuple(
            None if a < 0 else (int(a), int(b))
            for a, b in zip(w.tolist(), wpos[slots].tolist(), strict=True)
        )
        for leaker, n in zip(*np.unique(w[(w >= 0) & (w != i)], return_counts=True), strict=True):
            out.exposures[(i, int(leaker))] = int(n)

    def _emit(
        self,
        out: UnifiedRun,
        on: bool,
        t: int,
        r: Req,
        op: str,
        ids: list[int],
        p0: int,
        p1: int,
        first: int = 0,
    ) -> None:
        if not on:
            return
        pages = np.asarray(ids, np.int64)
        for slot, n, pos in runs(pages, p0, p1, self.ps):
            out.events.append((t, r.request_id, op, slot, n, pos + first * self.ps, None))


def explore(node: UnifiedNode, drv: EngineAllocators) -> UnifiedResult:
    """Every placement of the unlogged steps the log leaves open (step_layouts), each with the
    stub's prompt shared with its account's prefix and not; the consistent runs kept."""
    res = UnifiedResult()
    why = node.missing()
    if why:
        res.why = why
        return res
    schedules = node.schedules(SCHEDULES)
    res.ambiguous = len(schedules) - 1
    if len(schedules) > SCHEDULES:
        res.why = f"more than {SCHEDULES} decode-block schedules fit the log"
        return res
    stubs = any(r.stub for r in node.reqs)
    first = True
    for where in schedules:
        for stub_shared in (True, False) if stubs else (True,):
            run = node.run(drv, where, stub_shared, events=first)
            res.runs += 1
            if not run.ok:
                res.why = res.why or run.why
                continue
            if first:
                res.events = run.events
                first = False
            res.kept += 1
            for pair, n in run.exposures.items():
                res.exposures[pair] += 1
                res.tokens[pair] = max(res.tokens.get(pair, 0), n)
            for receiver, layout in run.layouts.items():
                res.layouts.setdefault(receiver, Counter())[layout] += 1
    res.consistent = res.kept > 0
    return res
