"""Per node: split the observations into engine starts, choose each value, and give the verdict
(one full-length request fits in the KV pool, or not).

Choosing a value inside one start:
- lines from rank 0 of every dimension but DP are used when there are any (other ranks repeat
  them); each DP rank has its own pool, and the smallest pool is the node's (a request can land
  on any rank);
- among a rank's lines the most authoritative source wins (see sglang.PRIORITY and
  vllm.PRIORITY), and among equals the last line (a pool resized after start-up);
- vLLM V0 gives blocks: pool = blocks x block size (16 unless a block_size was logged).
A new start begins at a start-up banner (server_args dump, vLLM engine banner) once the current
one has capacity lines from that DP rank, or when a once-per-start capacity line repeats."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from forensics.logs import sglang, vllm
from forensics.logs.lines import dp_rank
from forensics.logs.parse import FileResult, Observation
from forensics.logs.specs import to_int

PRIORITY = {**sglang.PRIORITY, **vllm.PRIORITY}
_CAPACITY = ("pool_slots", "context_len")
SCHEDULER_LIMITS = ("max_num_seqs", "max_num_batched_tokens")  # vLLM, where logged
_TEXT_FACTS = (  # taken as written; chunked_prefill to kv_cache_groups vLLM's, where logged
    "role",
    "model",
    "engine_version",
    "chunked_prefill",
    "prefix_caching",
    "device",
    "data_parallel_size",
    "kv_cache_groups",
    "decode_radix_cache",  # SGLang's, where logged
    "reserved_decode_tokens",  # SGLang's --num-reserved-decode-tokens, where logged
)
_ONCE_PER_START = {"sglang.max-total", "vllm.kv-cache-size", "vllm.gpu-blocks"}


@dataclass(frozen=True)
class Fact:
    value: Any
    src_file: str | None
    src_line: int | None
    source: str  # the kind of line it came from, or "default"

    @property
    def provenance(self) -> str:
        return f"{self.src_file}:{self.src_line}" if self.src_file else self.source


@dataclass
class RunAudit:
    index: int
    started_at: datetime | None
    facts: dict[str, Fact]
    notes: list[str] = field(default_factory=list)

    def value(self, name: str) -> Any:
        fact = self.facts.get(name)
        return fact.value if fact else None

    @property
    def ratio(self) -> float | None:
        pool, ctx = self.value("pool_slots"), self.value("context_len")
        return round(pool / ctx, 4) if pool is not None and ctx else None

    @property
    def fits(self) -> bool | None:
        pool, ctx = self.value("pool_slots"), self.value("context_len")
        return None if pool is None or ctx is None else pool >= ctx


def split_runs(observations: list[Observation]) -> list[list[Observation]]:
    runs: list[list[Observation]] = [[]]
    seen: dict[tuple[str, str, tuple[tuple[str, int], ...]], int] = {}
    capacity_dp: set[int] = set()
    for ob in observations:
        restart = ob.fact == "start" and ob.primary and dp_rank(ob.ranks) in capacity_dp
        key = (ob.kind, ob.src_file, ob.ranks)
        repeat = ob.kind in _ONCE_PER_START and seen.get(key, ob.src_line) != ob.src_line
        if (restart or repeat) and runs[-1]:
            runs.append([])
            seen.clear()
            capacity_dp.clear()
        runs[-1].append(ob)
        if ob.fact in _CAPACITY or ob.fact == "gpu_blocks":
            seen.setdefault(key, ob.src_line)
        if ob.fact in ("pool_slots", "gpu_blocks"):
            capacity_dp.add(dp_rank(ob.ranks))
    return runs


def _candidates(run: list[Observation], fact: str) -> list[Observation]:
    """The lines of `fact` from the first rank of each DP rank (lowest TP/PP/EP numbers)."""
    found = [o for o in run if o.fact == fact]
    lowest: dict[int, int] = {}
    for o in found:
        dp = dp_rank(o.ranks)
        lowest[dp] = min(lowest.get(dp, _level(o)), _level(o))
    return [o for o in found if _level(o) == lowest[dp_rank(o.ranks)]]


def _level(ob: Observation) -> int:
    """0 for a line of rank 0 in every dimension but DP (or none), else its highest rank."""
    return max((num for name, num in ob.ranks if name != "DP"), default=0)


def _best(cands: list[Observation]) -> Observation:
    """Most authoritative source first, then complete lines, then the last line."""
    ranked = enumerate(cands)
    return min(ranked, key=lambda p: (PRIORITY.get(p[1].kind, 9), not p[1].complete, -p[0]))[1]


def _choose_number(run: list[Observation], fact: str, notes: list[str]) -> Fact | None:
    cands = [o for o in _candidates(run, fact) if to_int(o.value) is not None]
    if not cands:
        return None
    per_dp = {
        dp: _best([o for o in cands if dp_rank(o.ranks) == dp])
        for dp in sorted({dp_rank(o.ranks) for o in cands})
    }
    chosen = min(per_dp.values(), key=lambda o: to_int(o.value) or 0)
    values = {to_int(o.value) or 0 for o in per_dp.values()}
    if len(values) > 1:
        notes.append(
            f"{fact} differs between DP ranks ({', '.join(map(str, sorted(values)))}); "
            "the smallest is used"
        )
    _note_disagreement(cands, fact, notes)
    return Fact(to_int(chosen.value), chosen.src_file, chosen.src_line, chosen.kind)


def _note_disagreement(cands: list[Observation], fact: str, notes: list[str]) -> None:
    if fact != "context_len":
        return
    seen: dict[int | None, Observation] = {}
    for o in cands:
        seen.setdefault(to_int(o.value), o)
    if len(seen) > 1:
        listed = ", ".join(f"{v} ({o.src_file}:{o.src_line})" for v, o in seen.items())
        notes.append(f"context length differs between lines: {listed}")


def _choose_text(run: list[Observation], fact: str) -> Fact | None:
    cands = _candidates(run, fact)
    if not cands:
        return None
    first = cands[0]
    value = sglang.ROLES.get(first.value.lower(), first.value) if fact == "role" else first.value
    return Fact(value, first.src_file, first.src_line, first.kind)


def _with_blocks(
    run: list[Observation], facts: dict[str, Fact], notes: list[str]
) -> list[Observation]:
    """Turn vLLM V0 block counts into pool sizes (blocks x block size)."""
    blocks = [o for o in run if o.fact == "gpu_blocks"]
    if not blocks:
        return run
    size = facts.get("page_size") or Fact(vllm.DEFAULT_BLOCK_SIZE, None, None, "default")
    facts.setdefault("page_size", size)
    notes.append(f"pool = GPU blocks x block size {size.value} ({size.provenance})")
    pools = [
        replace(o, fact="pool_slots", value=str((to_int(o.value) or 0) * size.value))
        for o in blocks
    ]
    return run + pools


def _overridden_block_size(
    run: list[Observation], facts: dict[str, Fact], notes: list[str]
) -> Fact | None:
    """vLLM v1's block size where no line names it: the KV cache size in tokens over the blocks
    --num-gpu-blocks-override made the pool of, when both were logged and divide evenly. It
    assumes one KV cache group (every layer full attention); with several (sliding-window or
    hybrid layers, which vLLM logs as `kv cache group sizes`) the tokens line counts one group's
    share, and nothing is derived."""
    pool, blocks = facts.get("pool_slots"), _choose_number(run, "blocks_override", notes)
    if pool is None or blocks is None or pool.source != "vllm.kv-cache-size":
        return None
    if "kv_cache_groups" in facts:
        notes.append("more than one KV cache group: the block size is not derived")
        return None
    if not blocks.value or pool.value % blocks.value:
        return None
    size = pool.value // blocks.value
    notes.append(f"block size {size} = KV cache size {pool.value} / {blocks.value} blocks")
    return Fact(size, blocks.src_file, blocks.src_line, blocks.source)


def audit_run(index: int, run: list[Observation], engine: str | None) -> RunAudit:
    notes: list[str] = []
    facts: dict[str, Fact] = {}
    page = _choose_number(run, "page_size", notes)
    if page:
        facts["page_size"] = page
    run = _with_blocks(run, facts, notes)
    for name in _CAPACITY:
        if chosen := _choose_number(run, name, notes):
            facts[name] = chosen
    for name in SCHEDULER_LIMITS:
        if chosen := _choose_number(run, name, notes):
            facts[name] = chosen
    for name in _TEXT_FACTS:
        if chosen_text := _choose_text(run, name):
            facts[name] = chosen_text
    if engine == "vllm" and "page_size" not in facts:
        facts["page_size"] = _overridden_block_size(run, facts, notes) or Fact(
            vllm.DEFAULT_BLOCK_SIZE, None, None, "default"
        )
    started = next((o.ts for o in run if o.ts is not None), None)
    return RunAudit(index, started, facts, notes)


@dataclass
class NodeAudit:
    node: str
    engine: str | None
    files: list[str]
    runs: list[RunAudit]

    @property
    def verdict_run(self) -> RunAudit:
        """The start that decides the verdict: a misfit first (smallest ratio), then an
        undetermined one, then the tightest fit."""

        def key(r: RunAudit) -> tuple[int, float]:
            rank = {False: 0, None: 1, True: 2}[r.fits]
            return rank, r.ratio if r.ratio is not None else 0.0

        return min(self.runs, key=key)

    @property
    def fits(self) -> bool | None:
        return self.verdict_run.fits

    @property
    def reason(self) -> str:
        run = self.verdict_run
        missing = [n for n in _CAPACITY if n not in run.facts]
        if missing:
            return "not found in the log: " + ", ".join(missing)
        if run.fits:
            return "one full-length request fits"
        return (
            f"KV pool holds {run.value('pool_slots'):,} tokens, fewer than the context "
            f"length {run.value('context_len'):,}"
        )


def audit_node(node: str, results: list[FileResult]) -> NodeAudit:
    engines: Counter[str] = Counter()
    observations: list[Observation] = []
    for res in results:
        engines.update(res.engines)
        observations.extend(res.observations)
    engine = engines.most_common(1)[0][0] if engines else None
    runs = [audit_run(i, run, engine) for i, run in enumerate(split_runs(observations))]
    return NodeAudit(node, engine, [r.file.rel for r in results], runs)
