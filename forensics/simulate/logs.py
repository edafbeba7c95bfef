"""Engine logs per node in SGLang's format (docs/engines.md): the server_args dump and start-up
capacity lines, then per-request lines (rejections, batches) in time order.

Line prefix: `[YYYY-mm-dd HH:MM:SS TP0] ` on prefill nodes and `[YYYY-mm-dd HH:MM:SS DP0 TP0] `
on decode nodes; the server_args dump has no rank."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from forensics.simulate.config import Scenario

GIB_PER_TOKEN = 0.0000605  # K (or V) bytes per token of the simulated model, in GB


def _stamp(us: int, rank: str) -> str:
    t = datetime.fromtimestamp(us / 1e6, UTC).strftime("%Y-%m-%d %H:%M:%S")
    return f"[{t}{rank}] "


def _rank(role: str) -> str:
    return " TP0" if role == "prefill" else " DP0 TP0"


def startup_lines(sc: Scenario, role: str, t0: int) -> list[tuple[int, str]]:
    pool = sc.prefill_pool if role == "prefill" else sc.decode_pool
    size = pool * GIB_PER_TOKEN
    args = (
        f"server_args=ServerArgs(model_path='{sc.model}', tokenizer_path='{sc.model}', "
        f"tokenizer_mode='auto', load_format='auto', trust_remote_code=True, "
        f"dtype='bfloat16', kv_cache_dtype='auto', context_length={sc.context_len}, "
        f"mem_fraction_static=0.88, max_running_requests=128, chunked_prefill_size=8192, "
        f"max_prefill_tokens=16384, page_size={sc.page_size}, tp_size=8, "
        f"disaggregation_mode='{role}', disaggregation_transfer_backend='mooncake', "
        f"num_reserved_decode_tokens=512, host='0.0.0.0', port=30000)"
    )
    lines = [
        (t0, args),
        (
            t0 + 41_000_000,
            f"KV Cache is allocated. dtype: torch.bfloat16, #tokens: {pool}, "
            f"K size: {size:.2f} GB, V size: {size:.2f} GB",
        ),
        (
            t0 + 42_000_000,
            f"max_total_num_tokens={pool}, chunked_prefill_size=8192, "
            f"max_prefill_tokens=16384, max_running_requests=128, "
            f"context_len={sc.context_len}, available_gpu_mem=9.73 GB",
        ),
    ]
    if pool < sc.context_len:
        lines.append(
            (
                t0 + 42_000_001,
                f"KV pool holds {pool} tokens, fewer than --context-length "
                f"{sc.context_len}. One full-length request cannot fit, so long requests "
                "will be refused or truncated at serving time. Lower --context-length or "
                "raise --mem-fraction-static to make them agree.",
            )
        )
    lines.append((t0 + 55_000_000, "The server is fired up and ready to roll!"))
    return lines


def write_logs(folder: Path, sc: Scenario, events: list[tuple[int, int, str]]) -> None:
    """One log file per node: start-up lines, then the engine's lines in time order."""
    folder.mkdir(parents=True, exist_ok=True)
    t0 = int(sc.start.timestamp() * 1e6) - 600_000_000
    for k, (node, role) in enumerate(sc.node_names()):
        rank = _rank(role)
        body = sorted((t, i, text) for i, (t, n, text) in enumerate(events) if n == k)
        with (folder / f"{node}.log").open("w") as fh:
            for t, text in startup_lines(sc, role, t0):
                prefix = _stamp(t, "") if text.startswith("server_args") else _stamp(t, rank)
                fh.write(prefix + text + "\n")
            for t, _, text in body:
                fh.write(_stamp(t, rank) + text + "\n")
