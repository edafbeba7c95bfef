"""The simulated cluster and its traffic: one frozen Scenario, scaled with --scale.

The default scenario is the incident of DESIGN.md §1: a model advertising a 1,048,576-token context
served by prefill nodes whose KV pool holds only 681,280 token slots, and decode nodes with larger
pools. `Scenario.scaled(f)` shrinks every size (context, pools, prompt and output lengths) by the
same factor, so a small sample keeps the incident's shape: the prefill pool stays smaller than the
context."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import UTC, datetime

from forensics.errors import UsageError
from forensics.options import Bug

BUGS = tuple(b.value for b in Bug if b is not Bug.NONE)
DEFAULT_START = datetime(2026, 8, 27, 0, 0, tzinfo=UTC)


@dataclass(frozen=True)
class Scenario:
    """Every knob of the simulated cluster. Sizes are in tokens (KV token slots)."""

    context_len: int = 1_048_576
    prefill_pool: int = 681_280
    decode_pool: int = 1_441_792
    page_size: int = 16
    prefill_nodes: int = 2
    decode_nodes: int = 2
    model: str = "example-org/longctx-1m-instruct"
    engine_version: str = ""  # "": the release that reuses pages as `allocator` does (release)
    allocator: str = "lifo"  # page reuse: lifo (own model), sglang or vllm (the real classes)
    start: datetime = DEFAULT_START
    days: float = 14.0
    accounts: int = 0  # 0: derived from the number of requests
    vocab_size: int = 32_000
    # traffic shape
    body_median: int = 800  # typical prompt length (capped at 5 % of the context)
    long_share: float = 0.05  # share of long-context prompts (log-uniform over the context)
    long_low: float = 0.2  # long prompts start at this fraction of the context
    output_median: int = 120
    output_max: int = 2048
    templates_per_account: int = 3
    # token ids a prompt's own part (and each shared prefix) is drawn from, as text repeats its
    # words; 0: uniformly from the vocabulary (the project's random-weight test model tells
    # such contexts apart only weakly, so sampled outputs carry little evidence of what was read)
    prompt_words: int = 0
    # engine timing (microseconds unless stated)
    prefill_tokens_per_s: float = 22_000.0
    transfer_tokens_per_s: float = 2_000_000.0
    tpot_us: int = 28_000
    # bug rates (used only when the bug is switched on)
    late_transfer_rate: float = 0.03
    double_alloc_rate: float = 0.02
    prefix_collision_rate: float = 0.05
    bugs: frozenset[str] = field(default_factory=lambda: frozenset({"oversize-stub"}))
    fixed_at: datetime | None = None
    scale: float = 1.0

    @property
    def release(self) -> str:
        """The SGLang release the nodes table names: the one given, else one whose allocator
        hands out freed pages as the simulated pool does on a disaggregated node. The project's
        own pool hands out the most recently freed page first, as SGLang's paged allocator did
        before 0.4.9.post4 (no release does so with one-token pages: none named then); the real
        classes are driven as a recent disaggregated node builds them (staged frees)."""
        if self.engine_version:
            return self.engine_version
        if self.allocator == "lifo":
            return "0.4.9" if self.page_size > 1 else ""
        return "0.5.19"

    def scaled(self, factor: float) -> Scenario:
        """The same cluster with every size multiplied by `factor` (0 < factor <= 1)."""
        if not 0 < factor <= 1:
            raise UsageError(f"--scale must be in (0, 1], got {factor}")
        page = self.page_size

        def size(n: int) -> int:
            return max(page * 8, int(round(n * factor / page)) * page)

        return dataclasses.replace(
            self,
            context_len=max(64, int(round(self.context_len * factor))),
            prefill_pool=size(self.prefill_pool),
            decode_pool=size(self.decode_pool),
            output_max=max(8, min(self.output_max, int(self.context_len * factor * 0.2))),
            scale=factor,
        )

    @property
    def max_prefill_tokens(self) -> int:
        """Longest prompt the prefill pool can take (max_total_num_tokens)."""
        return self.prefill_pool

    def buffer_slots(self, role: str) -> int:
        """Slots of a node's KV pool as its log states them (max_total_num_tokens): slot ids
        lie in [0, buffer_slots), page 0 among them is reserved and never handed out."""
        return self.prefill_pool if role == "prefill" else self.decode_pool

    @property
    def body_cap(self) -> int:
        return max(16, min(self.body_median, self.context_len // 20))

    def bug(self, name: str) -> bool:
        return name in self.bugs

    def node_names(self) -> list[tuple[str, str]]:
        """(node, role) for every engine instance, prefill nodes first."""
        nodes = [(f"prefill-{i}", "prefill") for i in range(self.prefill_nodes)]
        return nodes + [(f"decode-{i}", "decode") for i in range(self.decode_nodes)]
