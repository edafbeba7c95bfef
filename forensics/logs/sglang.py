"""SGLang start-up lines: pool size, context length, page size, role and model.

Formats (SGLang 0.5.x and older builds; see docs/engines.md):
  KV Cache is allocated. dtype: {dtype}, #tokens: {N}, K size: {x} GB, V size: {y} GB
  KV Cache is allocated. #tokens: {N}, K size: ...           (older: no dtype)
  KV Cache is allocated. dtype: {dtype}, #tokens: {N}, KV size: {z} GB   (MLA)
  Post-capture KV sizing: KV cache allocated. dtype: ..., #tokens: {N}, KV size: ...
  max_total_num_tokens={N}, chunked_prefill_size=..., context_len={L}, available_gpu_mem=...
  KV pool holds {N} tokens, fewer than --context-length {L}. One full-length request ...
  server_args=ServerArgs(...) or server_args={'model_path': ..., 'page_size': 1, ...}
  Prefill batch, #new-seq: {S}, #new-token: {N}, #cached-token: {C}, ... / Prefill batch. (older)
  Prefill batch [{iter}], #new-seq: ... (SGLANG_LOG_FORWARD_ITERS), Decode batch ...
"""

from __future__ import annotations

from forensics.logs.specs import Spec, rx

_NUM = r"\d[\d,]*"
_SIZE = r"(?:K size: [\d.]+ GB, V size: [\d.]+ GB|KV size: [\d.]+ GB)"


def _arg(name: str, value: str) -> str:
    """A key in a ServerArgs(...) repr or a dict dump, followed by its value and a delimiter."""
    return rf"(?<![\w'\"])['\"]?{name}['\"]?\s*[=:]\s*{value}(?=\s*[,)}}])"


KV_ALLOCATED = Spec(
    "sglang.kv-allocated",
    "sglang",
    needle="KV Cache is allocated",
    head=rx(r"(?<![\w-] )(?<!\w)KV Cache is allocated\b"),
    full=rx(rf"KV Cache is allocated\.\s+(?:dtype: \S+, )?#tokens: (?P<pool_slots>\d+), {_SIZE}"),
    partial=(rx(r"#tokens: (?P<pool_slots>\d+),"),),
)
KV_POST_CAPTURE = Spec(
    "sglang.kv-post-capture",
    "sglang",
    needle="KV cache allocated",
    head=rx(r"Post-capture KV sizing: KV cache allocated\b"),
    full=rx(
        r"KV cache allocated\.\s+(?:dtype: \S+, )?#tokens: (?P<pool_slots>\d+), KV size: "
        r"[\d.]+ GB"
    ),
    partial=(rx(r"#tokens: (?P<pool_slots>\d+),"),),
)
MAX_TOTAL = Spec(
    "sglang.max-total",
    "sglang",
    needle="max_total_num_tokens=",
    head=rx(r"(?<![\w(.])max_total_num_tokens=\d"),
    # Builds before 0.4.x end the line at context_len; newer ones add the free memory.
    full=rx(
        r"max_total_num_tokens=(?P<pool_slots>\d+), .*?context_len=(?P<context_len>\d+)"
        r"(?:, available_[cg]pu_mem=[\d.]+ GB|\s*$)"
    ),
    partial=(
        rx(r"max_total_num_tokens=(?P<pool_slots>\d+),"),
        rx(r"context_len=(?P<context_len>\d+),"),
    ),
)
POOL_WARNING = Spec(
    "sglang.pool-warning",
    "sglang",
    needle="KV pool holds",
    head=rx(r"KV pool holds \d"),
    full=rx(
        r"KV pool holds (?P<pool_slots>\d+) tokens, fewer than --context-length "
        r"(?P<context_len>\d+)\."
    ),
    partial=(rx(r"KV pool holds (?P<pool_slots>\d+) tokens"),),
)
SERVER_ARGS = Spec(
    "sglang.server-args",
    "sglang",
    needle="server_args=",
    head=rx(r"(?<!\w)server_args=(?:ServerArgs\(|\{)"),
    full=rx(r"server_args=(?:ServerArgs\(.*\)|\{.*\})\s*$"),
    extras=(
        rx(_arg("page_size", r"(?P<page_size>\d+)")),
        rx(_arg("context_length", r"(?P<context_len>\d+)")),
        rx(_arg("model_path", r"['\"](?P<model>[^'\"]+)['\"]")),
        rx(_arg("disaggregation_mode", r"['\"](?P<role>\w+)['\"]")),
        # the decode headroom a disaggregated decode node's prealloc queue keeps free
        rx(_arg("num_reserved_decode_tokens", r"(?P<reserved_decode_tokens>\d+)")),
        # a disaggregated decode node's own radix cache (off unless the operator turns it on)
        rx(
            _arg(
                "disaggregation_decode_enable_radix_cache",
                r"(?P<decode_radix_cache>True|False)",
            )
        ),
    ),
    starts_run=True,
)
# A prefill batch's own counts (SGLang's SchedulerMetricsReporter.report_prefill_stats in 0.5.x,
# log_prefill_stats before): #new-seq is the batch's requests (a chunked prompt's later chunks
# count again), #new-token the prompt tokens it computes (PrefillAdder.log_input_tokens, the sum
# of each request's extend length in this batch), #cached-token those it took from the radix
# cache (log_hit_tokens, the sum of the prefix lengths). Per batch, not running totals.
PREFILL_COUNTS = (
    r"Prefill batch(?: \[\d+\])?[.,] #new-seq: (?P<new_seqs>\d+), #new-token: (?P<new_tokens>\d+), "
    r"#cached-token: (?P<cached_tokens>\d+),"
)
BATCH = Spec(
    "sglang.batch",
    "sglang",
    needle=" batch",
    head=rx(r"\b(?:Prefill|Decode) batch(?: \[\d+\])?[.,] #"),  # [n]: SGLANG_LOG_FORWARD_ITERS
    full=rx(r"(?:throughput \(token/s\): [\d.]+|#queue-req: \d+)\s*$"),
    extras=(rx(PREFILL_COUNTS),),
)

SPECS: tuple[Spec, ...] = (
    KV_ALLOCATED,
    KV_POST_CAPTURE,
    MAX_TOTAL,
    POOL_WARNING,
    SERVER_ARGS,
    BATCH,
)

# Which source of a value wins inside one engine start (lower first). The warning is what the
# engine says it will serve; max_total_num_tokens is the scheduler's budget; the allocation lines
# describe the buffers (which can carry a page of padding).
PRIORITY: dict[str, int] = {
    "sglang.pool-warning": 0,
    "sglang.max-total": 1,
    "sglang.kv-post-capture": 2,
    "sglang.kv-allocated": 3,
    "sglang.server-args": 5,
}

ROLES = {"prefill": "prefill", "decode": "decode", "null": "unified", "none": "unified"}
