"""Serve token-id requests on a real vLLM (CPU build) with the ledger tap, as a gateway would,
for the tap's tests and its overhead benchmark. Runs in the engines environment:

    python tests/vllm_run.py MODE MODEL_DIR OUT_DIR

MODE: `healthy` (requests with shared prefixes, in waves, on a small pool so blocks are reused
and evicted), `faults` (the same, then two injected engine faults, see `install_faults`) or
`bench` (a throughput run; the tap is on when KVFORENSICS_TAP_DIR is set).
Writes OUT_DIR/requests.csv and accounts.csv (the gateway's view), OUT_DIR/run.json (outputs,
injected faults, tokens/s). The tap itself writes where KVFORENSICS_TAP_DIR points.

MODEL_DIR is written first when it holds no config.json: a random-weight Llama (hidden 256,
4 heads, 2 layers, vocabulary 512), seeded, in safetensors."""

from __future__ import annotations

import csv
import datetime as dt
import json
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

BLOCK = 32
NODE = "vllm-0"
FAULTS: dict[str, Any] = {}


def write_model(folder: Path) -> None:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        hidden_size=256,
        intermediate_size=512,
        num_attention_heads=4,
        num_key_value_heads=4,
        num_hidden_layers=2,
        vocab_size=512,
        max_position_embeddings=1024,
        bos_token_id=1,
        eos_token_id=2,
        torch_dtype="float32",
    )
    torch.manual_seed(17)
    model = LlamaForCausalLM(config)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.25)
    model.save_pretrained(folder, safe_serialization=True)


def install_faults() -> None:
    """Two engine faults, keyed by request id prefix, patched into vLLM's KV cache manager:

    - `stub-…`: the request runs as a 1-token stub: the engine takes all but its last prompt
      token as already computed without any prefix-cache hit, allocates fresh blocks for the
      whole prompt, computes the last token only and attends over all of them;
    - `dup-…`: the request's last new block is the first block of the running `victim-…`
      request, handed out while the victim still holds it."""
    from vllm.v1.core.kv_cache_manager import KVCacheManager

    lookup = KVCacheManager.get_computed_blocks
    allocate = KVCacheManager.allocate_slots

    def get_computed_blocks(self: Any, request: Any) -> Any:
        if request.request_id.startswith("stub-"):
            return self.empty_kv_cache_blocks, request.num_tokens - 1, 0
        return lookup(self, request)

    def allocate_slots(self: Any, request: Any, *args: Any, **kwargs: Any) -> Any:
        if not request.request_id.startswith("dup-") or "dup" in FAULTS:
            return allocate(self, request, *args, **kwargs)
        victim = next(
            r
            for r in self.coordinator.single_type_managers[0].req_to_blocks
            if r.startswith("victim-")
        )
        block = self.get_block_ids(victim)[0][0]
        pool = self.block_pool
        fresh = pool.get_new_blocks

        def get_new_blocks(n: int) -> list[Any]:
            got = fresh(n - 1)
            stolen = pool.blocks[block]
            stolen.ref_cnt += 1
            return [*got, stolen]

        pool.get_new_blocks = get_new_blocks
        try:
            result = allocate(self, request, *args, **kwargs)
        finally:
            del pool.get_new_blocks
        FAULTS["dup"] = {"block": block, "victim": victim, "request": request.request_id}
        return result

    KVCacheManager.get_computed_blocks = get_computed_blocks
    KVCacheManager.allocate_slots = allocate_slots


if len(sys.argv) > 1 and sys.argv[1] in ("faults", "batched"):
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    install_faults()


def iso(t: float) -> str:
    return dt.datetime.fromtimestamp(t, dt.UTC).isoformat(timespec="microseconds")


class Gateway:
    """Adds requests to the engine, steps it, and keeps what a gateway would log."""

    def __init__(self, engine: Any):
        self.engine = engine
        self.rows: dict[str, dict[str, Any]] = {}
        self.outputs: dict[str, list[int]] = {}

    def add(self, rid: str, account: str, prompt: list[int], max_tokens: int) -> None:
        from vllm import SamplingParams

        params = SamplingParams(max_tokens=max_tokens, temperature=0.0, ignore_eos=True)
        self.engine.add_request(rid, {"prompt_token_ids": prompt}, params)
        self.rows[rid] = {
            "request_id": rid,
            "account_id": account,
            "model": "tiny-llama",
            "received_at": time.time(),
            "first_token_at": None,
            "completed_at": None,
            "http_status": 200,
            "prompt_tokens": len(prompt),
            "completion_tokens": 0,
            "node": NODE,
            "cached_tokens": None,
        }

    def step(self, n: int | None = None) -> None:
        """Step n times, or until every request finished."""
        k = 0
        while self.engine.has_unfinished_requests() and (n is None or k < n):
            k += 1
            for out in self.engine.step():
                row, now = self.rows[out.request_id], time.time()
                tokens = list(out.outputs[0].token_ids)
                if tokens and row["first_token_at"] is None:
                    row["first_token_at"] = now
                if out.num_cached_tokens is not None:  # usage.prompt_tokens_details
                    row["cached_tokens"] = out.num_cached_tokens
                if out.finished:
                    row["completed_at"] = now
                    row["completion_tokens"] = len(tokens)
                    self.outputs[out.request_id] = tokens

    def write(self, out_dir: Path) -> None:
        out_dir.mkdir(parents=True, exist_ok=True)
        fields = list(next(iter(self.rows.values())))
        with open(out_dir / "requests.csv", "w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=fields)
            writer.writeheader()
            for row in self.rows.values():
                writer.writerow(
                    {k: iso(v) if k.endswith("_at") and v else v for k, v in row.items()}
                )
        accounts = sorted({r["account_id"] for r in self.rows.values()})
        with open(out_dir / "accounts.csv", "w", newline="") as fh:
            fh.write("account_id,name\n" + "".join(f"{a},{a}\n" for a in accounts))


def healthy(gw: Gateway, rng: random.Random) -> None:
    """Three accounts, each with a 64-token shared prefix and its own suffixes, in two waves:
    the second wave hits the first wave's cached prefixes; the small pool forces reuse."""
    prefixes = {a: [rng.randrange(3, 512) for _ in range(2 * BLOCK)] for a in "abc"}
    for wave in range(2):
        for a, prefix in prefixes.items():
            for k in range(2):
                suffix = [rng.randrange(3, 512) for _ in range(rng.randrange(5, 45))]
                gw.add(f"req-{a}{wave}{k}", f"acct-{a}", prefix + suffix, rng.randrange(6, 20))
        gw.step()


def faults(gw: Gateway, rng: random.Random) -> None:
    healthy(gw, rng)
    gw.add("victim-1", "acct-v", [rng.randrange(3, 512) for _ in range(2 * BLOCK)], 24)
    gw.step(3)
    gw.add("dup-1", "acct-x", [rng.randrange(3, 512) for _ in range(BLOCK + 8)], 4)
    gw.step()
    gw.add("stub-1", "acct-s", [rng.randrange(3, 512) for _ in range(3 * BLOCK + 1)], 6)
    gw.step()


def batched(gw: Gateway, rng: random.Random) -> None:
    """The stub fault under batched load: 24 requests of 4 accounts, each account's prompts
    sharing a 128-token prefix, arriving every one to three engine steps so that several run at
    once; one ordinary request (`stub-…`, its length drawn like the others') runs as a stub."""
    prefixes = [[rng.randrange(3, 512) for _ in range(4 * BLOCK)] for _ in range(4)]
    stub_at = int(os.environ.get("BATCHED_STUB_AT", "14"))
    for k in range(24):
        suffix = [rng.randrange(3, 512) for _ in range(rng.randrange(8, 72))]
        rid = f"stub-{k}" if k == stub_at else f"req-{k}"
        gw.add(rid, f"acct-{k % 4}", prefixes[k % 4] + suffix, rng.randrange(4, 16))
        gw.step(rng.randrange(1, 4))
    gw.step()


def bench(gw: Gateway, rng: random.Random) -> None:
    prefixes = [[rng.randrange(3, 512) for _ in range(2 * BLOCK)] for _ in range(4)]
    for k in range(int(os.environ.get("BENCH_REQUESTS", "32"))):
        suffix = [rng.randrange(3, 512) for _ in range(rng.randrange(16, 96))]
        gw.add(f"bench-{k}", f"acct-{k % 4}", prefixes[k % 4] + suffix, 64)
    gw.step()


def main() -> None:
    mode, model_dir, out_dir = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
    if not (model_dir / "config.json").is_file():
        write_model(model_dir)
    from vllm import LLM

    small = mode != "bench"
    llm = LLM(
        model=str(model_dir),
        skip_tokenizer_init=True,
        dtype="float32",
        block_size=BLOCK,
        enable_prefix_caching=True,
        enforce_eager=True,
        max_model_len=512,
        num_gpu_blocks_override=(40 if mode == "batched" else 24) if small else None,
        max_num_seqs=8,
        seed=0,
    )
    gw = Gateway(llm.llm_engine)
    t0 = time.time()
    modes = {"healthy": healthy, "faults": faults, "batched": batched, "bench": bench}
    modes[mode](gw, random.Random(int(os.environ.get("VLLM_RUN_SEED", "7"))))
    seconds = time.time() - t0
    generated = sum(len(v) for v in gw.outputs.values())
    gw.write(out_dir)
    (out_dir / "run.json").write_text(
        json.dumps(
            {
                "outputs": gw.outputs,
                "faults": FAULTS,
                "seconds": seconds,
                "generated": generated,
                "prompt_tokens": sum(r["prompt_tokens"] for r in gw.rows.values()),
                "tokens_per_s": generated / seconds,
            },
            indent=1,
        )
    )
    del llm


if __name__ == "__main__":
    main()
