"""vLLM start-up lines: KV cache capacity, maximum model length, block size, version, model.

Formats (vLLM 0.33 and older; see docs/engines.md):
  {GPU} KV cache size: {N:,} tokens, Maximum concurrency for {L:,} tokens per request: {c}x
  GPU KV cache size: {N:,} tokens            (older v1: two lines)
  Maximum concurrency for {L:,} tokens per request: {c}x
  # GPU blocks: {n}, # CPU blocks: {m}      (V0: pool = n x block size, 16 unless logged)
  Initializing a V1 LLM engine (v{version}) with config: model='...', ..., max_seq_len={L}, ...
  non-default args: {'model': ..., 'max_model_len': L, 'block_size': 32, 'max_num_seqs': 8, ...}
  Chunked prefill is enabled with max_num_batched_tokens={B}.
  Engine 000: Avg prompt throughput: {x:.1f} tokens/s, Avg generation throughput: {y:.1f}
    tokens/s, Running: {r} reqs, Waiting: {w} reqs, GPU KV cache usage: {u:.1f}%, Prefix cache
    hit rate: {h:.1f}%                    (v1 LoggingStatLogger.log, every 10 s; see below)
The scheduler's limits (max_num_seqs, max_num_batched_tokens, chunked prefill) are read where
logged: the engine banner's enable_chunked_prefill, the non-default args (only what the
operator set), the chunked-prefill line; and what decides the defaults of a limit not logged:
the banner's device_config and data_parallel_size (forensics/reconstruct/limits.py).
"""

from __future__ import annotations

from forensics.logs.specs import Spec, rx

DEFAULT_BLOCK_SIZE = 16
_N = r"\d[\d,]*\d|\d"


def _kv(name: str, value: str) -> str:
    """key=value or 'key': value, followed by a delimiter."""
    return rf"(?<![\w'\"])['\"]?{name}['\"]?\s*[=:]\s*{value}(?=\s*[,)}}])"


KV_CACHE_SIZE = Spec(
    "vllm.kv-cache-size",
    "vllm",
    needle="KV cache size: ",
    head=rx(r"KV cache size: \d"),
    full=rx(rf"KV cache size: (?P<pool_slots>{_N}) tokens\b"),
)
MAX_CONCURRENCY = Spec(
    "vllm.max-concurrency",
    "vllm",
    needle="Maximum concurrency for",
    head=rx(r"Maximum concurrency for \d"),
    full=rx(
        rf"Maximum concurrency for (?P<context_len>{_N}) tokens per request: "
        r"(?P<concurrency>[\d.]+)x"
    ),
    partial=(rx(rf"Maximum concurrency for (?P<context_len>{_N}) tokens per request"),),
)
GPU_BLOCKS = Spec(
    "vllm.gpu-blocks",
    "vllm",
    needle=" blocks: ",
    head=rx(r"# (?:GPU|CUDA|XPU|NPU|TPU|HPU) blocks: \d"),
    full=rx(r"# \w+ blocks: (?P<gpu_blocks>\d+), # CPU blocks: (?P<cpu_blocks>\d+)\b"),
    partial=(rx(r"# \w+ blocks: (?P<gpu_blocks>\d+),"),),
)
# v1 with --num-gpu-blocks-override (kv_cache_utils.py): the blocks the pool was made of, so that
# with the KV cache size line (tokens = blocks x block size for a model with one KV cache
# group) the block size follows where no line names it (audit.py).
BLOCKS_OVERRIDE = Spec(
    "vllm.blocks-override",
    "vllm",
    needle="num_gpu_blocks_override=",
    head=rx(r"Overriding num_gpu_blocks=\d+ with num_gpu_blocks_override=\d"),
    full=rx(
        r"Overriding num_gpu_blocks=\d+ with num_gpu_blocks_override=(?P<blocks_override>\d+)\b"
    ),
)
# v1 with more than one KV cache group (a hybrid model: sliding-window or Mamba layers beside
# full attention; kv_cache_utils.resolve_kv_cache_block_sizes, 0.32 logs it only then): the
# groups' block sizes. One group's pages are then not the node's, and the KV cache size line
# counts one group's share.
KV_GROUPS = Spec(
    "vllm.kv-groups",
    "vllm",
    needle="kv cache group sizes",
    head=rx(r"kv cache group sizes \("),
    full=rx(r"kv cache group sizes \((?P<kv_cache_groups>\d+(?:, *\d+)*),?\)"),
)
ENGINE_INIT = Spec(
    "vllm.engine-init",
    "vllm",
    needle="LLM engine (v",
    head=rx(r"Initializing an? (?:V1 )?LLM engine \(v"),
    full=rx(
        r"Initializing an? (?:V1 )?LLM engine \(v(?P<engine_version>[^)\s]+)\) with config: "
        r".*\S"
    ),
    partial=(rx(r"Initializing an? (?:V1 )?LLM engine \(v(?P<engine_version>[^)\s]+)\)"),),
    extras=(
        rx(_kv("model", r"'(?P<model>[^']+)'")),
        rx(_kv("max_seq_len", r"(?P<context_len>\d+)")),
        rx(_kv("block_size", r"(?P<page_size>\d+)")),
        rx(_kv("enable_chunked_prefill", r"(?P<chunked_prefill>True|False)")),
        rx(_kv("enable_prefix_caching", r"(?P<prefix_caching>True|False)")),
        rx(_kv("device_config", r"(?P<device>\w+)")),
        rx(_kv("data_parallel_size", r"(?P<data_parallel_size>\d+)")),
    ),
    starts_run=True,
)
NON_DEFAULT_ARGS = Spec(
    "vllm.args",
    "vllm",
    needle="non-default args",
    head=rx(r"non-default args: \{"),
    full=rx(r"non-default args: \{.*\}\s*$"),
    extras=(
        rx(_kv("model", r"'(?P<model>[^']+)'")),
        rx(_kv("max_model_len", r"(?P<context_len>\d+)")),
        rx(_kv("block_size", r"(?P<page_size>\d+)")),
        rx(_kv("max_num_seqs", r"(?P<max_num_seqs>\d+)")),
        rx(_kv("max_num_batched_tokens", r"(?P<max_num_batched_tokens>\d+)")),
        rx(_kv("enable_chunked_prefill", r"(?P<chunked_prefill>True|False)")),
        rx(_kv("enable_prefix_caching", r"(?P<prefix_caching>True|False)")),
        rx(_kv("data_parallel_size", r"(?P<data_parallel_size>\d+)")),
    ),
)
CHUNKED_PREFILL = Spec(
    "vllm.chunked-prefill",
    "vllm",
    needle="Chunked prefill is enabled",
    head=rx(r"Chunked prefill is enabled with max_num_batched_tokens=\d"),
    full=rx(
        r"Chunked prefill is enabled with max_num_batched_tokens=(?P<max_num_batched_tokens>\d+)"
    ),
)
VERSION = Spec(
    "vllm.version",
    "vllm",
    needle="API server version",
    head=rx(r"vLLM API server version \d"),
    full=rx(r"vLLM API server version (?P<engine_version>\d[\w.+-]*)"),
    starts_run=True,
)

# The v1 periodic stats line (vllm/v1/metrics/loggers.py, LoggingStatLogger.log; 0.32). The
# prompt throughput is the prompt tokens *computed* since the previous line (prefix-cache hits
# and KV transfers excluded: PromptTokenStats.computed, counted when a request's prefill
# output arrives) over the monotonic time since that line, rounded to 0.1 tokens/s; the hit
# rate is hits / queries over the most recent 1000 requests looked up (CachingMetrics), not per
# interval. An idle engine logs it at DEBUG only. docs/engines.md has the details.
STATS = Spec(
    "vllm.stats",
    "vllm",
    needle="Avg prompt throughput: ",
    head=rx(r"Avg prompt throughput: \d"),
    full=rx(
        r"Avg prompt throughput: (?P<prompt_throughput>\d+(?:\.\d+)?) tokens/s, Avg generation "
        r"throughput: (?P<generation_throughput>\d+(?:\.\d+)?) tokens/s, Running: "
        r"(?P<running>\d+) reqs, .*KV cache usage: [\d.]+%"
    ),
    partial=(rx(r"Avg prompt throughput: (?P<prompt_throughput>\d+(?:\.\d+)?) tokens/s,"),),
    extras=(
        rx(r"^Engine (?P<engine_index>\d{1,6}): "),
        rx(r"Waiting: (?P<waiting>\d+) reqs,"),
        rx(r"Prefix cache hit rate: (?P<prefix_hit_rate>\d+(?:\.\d+)?)%"),
    ),
)

SPECS: tuple[Spec, ...] = (
    KV_CACHE_SIZE,
    MAX_CONCURRENCY,
    GPU_BLOCKS,
    BLOCKS_OVERRIDE,
    KV_GROUPS,
    ENGINE_INIT,
    NON_DEFAULT_ARGS,
    CHUNKED_PREFILL,
    VERSION,
    STATS,
)

PRIORITY: dict[str, int] = {
    "vllm.kv-cache-size": 1,
    "vllm.max-concurrency": 1,
    "vllm.gpu-blocks": 2,
    "vllm.engine-init": 3,
    "vllm.args": 4,
    "vllm.chunked-prefill": 5,
}
