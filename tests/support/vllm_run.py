"""Serve token-id requests on a real vLLM (CPU build) with the ledger tap, as a gateway would, for
the tap's tests and its overhead benchmark. Runs in the engines environment:

    python tests/support/vllm_run.py MODE MODEL_DIR OUT_DIR

MODE: `healthy` (requests with shared prefixes, in waves, on a small pool so blocks are reused
and evicted), `faults` (the same, then two injected engine faults, see
tests/support/vllm_inject.py), the batched load (24 requests of 4 accounts, shared prefixes,
several in flight, a pool of 40 blocks) without a fault (`healthy-batched`) or with one:
`batched` (a stub), `batched-dup` (a block handed out while its holder still holds it),
`batched-collision` (a prefix-cache hash collision); `stats` (the batched load without a fault,
then again with the stub, with vLLM's stats logging on: LoggingStatLogger's line is printed
after each load, as a server prints it every 10 s; the monotonic time of each print is kept in
run.json `stats_calls`); or `bench` (a throughput run; the tap is on when KVFORENSICS_TAP_DIR
is set).
VLLM_RUN_SAMPLING=sampled samples every output (temperature 0.8, top-p 0.95, a seed per
request); the default is greedy. VLLM_RUN_SEED (default 7) draws the prompts.
VLLM_RUN_MAX_SEQS (default 8; `default` for vLLM's own, which its log does not name) and
VLLM_RUN_MAX_BATCHED (default vLLM's) are the scheduler's max_num_seqs and
max_num_batched_tokens (chunked prefill on when the budget is given).
Writes OUT_DIR/requests.csv (the gateway's view: times, usage with cached tokens, sampling
settings) and accounts.csv, OUT_DIR/run.json (outputs, the injected faults and their victims,
tokens/s, the most requests in flight). The tap itself writes where KVFORENSICS_TAP_DIR points.

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
from collections.abc import Callable
from pathlib import Path
from typing import Any

from vllm_inject import FAULTS, collide, install_faults

BLOCK = 32
# The engine's block size (VLLM_RUN_ENGINE_BLOCK; default BLOCK): the prompts keep their lengths
# in BLOCKs and the pool its tokens, so only how the engine pages them changes.
ENGINE_BLOCK = int(os.environ.get("VLLM_RUN_ENGINE_BLOCK", str(BLOCK)))
NODE = "vllm-0"
SAMPLED = os.environ.get("VLLM_RUN_SAMPLING", "greedy") == "sampled"


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


FAULTY = ("faults", "batched", "batched-cache-hit", "batched-dup", "batched-collision", "stats")
if len(sys.argv) > 1 and sys.argv[1] in FAULTY:
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
        self.most_in_flight = 0  # requests received and not yet completed, after a step
        self.stats_calls: list[float] = []  # time.monotonic() of each stats print

    def log_stats(self) -> None:
        """Print the engine's stats line now (vLLM's server does every 10 s)."""
        self.stats_calls.append(time.monotonic())
        self.engine.do_log_stats()

    def add(self, rid: str, account: str, prompt: list[int], max_tokens: int) -> None:
        from vllm import SamplingParams

        # sampled: each request its own seed, drawn from the run's seed and its arrival
        seed = 1000 * int(os.environ.get("VLLM_RUN_SEED", "7")) + len(self.rows)
        temperature, top_p = (0.8, 0.95) if SAMPLED else (0.0, 1.0)
        params = SamplingParams(
            max_tokens=max_tokens,
            temperature=temperature,
            top_p=top_p,
            seed=seed if SAMPLED else None,
            ignore_eos=True,
        )
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
            "temperature": temperature,
            "top_p": top_p,
            "top_k": 0,  # none
            "seed": seed if SAMPLED else None,
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
            in_flight = sum(r["completed_at"] is None for r in self.rows.values())
            self.most_in_flight = max(self.most_in_flight, in_flight)

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


# id, prompt, max_tokens (None: as drawn), and optionally another account
Changed = tuple[str, list[int], int | None] | tuple[str, list[int], int | None, str]
Special = Callable[[int, list[int], list[list[int]]], Changed | None]


def batched_load(gw: Gateway, rng: random.Random, special: Special | None = None) -> None:
    """24 requests of 4 accounts (BATCHED_REQUESTS, BATCHED_ACCOUNTS), each account's prompts
    sharing a 128-token prefix, arriving every one to three engine steps so that several run at
    once. `special(k, prompt, prefixes)` may give request k another (id, prompt, max_tokens)."""
    n_accounts = int(os.environ.get("BATCHED_ACCOUNTS", "4"))
    prefixes = [[rng.randrange(3, 512) for _ in range(4 * BLOCK)] for _ in range(n_accounts)]
    for k in range(int(os.environ.get("BATCHED_REQUESTS", "24"))):
        suffix = [rng.randrange(3, 512) for _ in range(rng.randrange(8, 72))]
        prompt = prefixes[k % n_accounts] + suffix
        rid, max_tokens = f"req-{k}", rng.randrange(4, 16)
        changed = special(k, prompt, prefixes) if special else None
        account = f"acct-{k % n_accounts}"
        if changed:
            rid, prompt, max_tokens = changed[0], changed[1], changed[2] or max_tokens
            account = changed[3] if len(changed) > 3 else account
        gw.add(rid, account, prompt, max_tokens)
        gw.step(rng.randrange(1, 4))
    gw.step()


def batched(gw: Gateway, rng: random.Random) -> None:
    """The stub fault under batched load: one ordinary request (`stub-…`, its length drawn like
    the others') runs as a stub."""
    stub_at = int(os.environ.get("BATCHED_STUB_AT", "14"))
    batched_load(gw, rng, lambda k, p, _: (f"stub-{k}", p, None) if k == stub_at else None)


def batched_cache_hit(gw: Gateway, rng: random.Random) -> None:
    """The stub fault read a second time through the prefix cache: the stub (`stub-…`, at
    BATCHED_STUB_AT) is the first request of a new account (`acct-new`, a 128-token prefix of its
    own) and the next request (`hit-…`) that account's second, sharing the prefix. The stub's
    blocks are cached under the prefix's hashes though it wrote none of its prompt, so the
    second is served them from the cache and reads what the stub read."""
    stub_at = int(os.environ.get("BATCHED_STUB_AT", "14"))
    prefix = [random.Random(rng.random()).randrange(3, 512) for _ in range(4 * BLOCK)]

    def special(k: int, p: list[int], _x: list[list[int]]) -> Changed | None:
        if k in (stub_at, stub_at + 1):
            rid = f"stub-{k}" if k == stub_at else f"hit-{k}"
            return rid, prefix + p[4 * BLOCK :], None, "acct-new"
        return None

    batched_load(gw, rng, special)


def batched_dup(gw: Gateway, rng: random.Random) -> None:
    """A block handed out while held, under batched load: request 10 (`victim-10`, a new
    conversation of 64 tokens, 40 output tokens) is still decoding when request 12 (`dup-12`, a
    new conversation of 40 tokens, 4 output tokens) is given the victim's first block as its
    second, and writes its positions 32..42 over the victim's first 11 positions."""
    fresh = random.Random(rng.random())

    def special(k: int, _p: list[int], _x: list[list[int]]) -> Changed | None:
        if k == 10:
            return "victim-10", [fresh.randrange(3, 512) for _ in range(2 * BLOCK)], 40
        if k == 12:
            return "dup-12", [fresh.randrange(3, 512) for _ in range(BLOCK + 8)], 4
        return None

    batched_load(gw, rng, special)


def batched_collision(gw: Gateway, rng: random.Random) -> None:
    """A prefix-cache hash collision under batched load: request 14 (`collide-14`, account 2, a
    new conversation as long as the others) has a first block whose hash is that of account 3's
    prefix (cached: account 3's request 11 ran just before), so the engine serves it account
    3's KV for its first 32 positions as a prefix-cache hit."""
    fresh = random.Random(rng.random())

    def special(k: int, p: list[int], prefixes: list[list[int]]) -> Changed | None:
        if k != 14:
            return None
        prompt = [fresh.randrange(3, 512) for _ in range(len(p))]
        collide(f"collide-{k}", prompt, prefixes[3], BLOCK)
        FAULTS["collision"]["source_account"] = "acct-3"
        return f"collide-{k}", prompt, 24

    batched_load(gw, rng, special)


def healthy_batched(gw: Gateway, rng: random.Random) -> None:
    batched_load(gw, rng)


def stats(gw: Gateway, rng: random.Random) -> None:
    """The batched load without a fault (`h-…`), then with the stub (`s-…`, the stub
    `stub-14`), each followed by the engine's stats line (the first print only starts the
    interval: an idle engine logs at DEBUG)."""
    gw.log_stats()
    batched_load(gw, rng, lambda k, p, _: (f"h-{k}", p, None))
    gw.log_stats()
    batched_load(gw, rng, lambda k, p, _: (f"stub-{k}" if k == 14 else f"s-{k}", p, None))
    gw.log_stats()


def bench(gw: Gateway, rng: random.Random) -> None:
    prefixes = [[rng.randrange(3, 512) for _ in range(2 * BLOCK)] for _ in range(4)]
    for k in range(int(os.environ.get("BENCH_REQUESTS", "32"))):
        suffix = [rng.randrange(3, 512) for _ in range(rng.randrange(16, 96))]
        gw.add(f"bench-{k}", f"acct-{k % 4}", prefixes[k % 4] + suffix, 64)
    gw.step()


def victims() -> list[str]:
    """The requests each injected fault made read another's data: the stubs (stale KV), the
    holder of the block handed out again (its KV overwritten while it decoded), the receiver
    of the hash collision (served another account's cached KV)."""
    held = [FAULTS["dup"]["victim"]] if "dup" in FAULTS else []
    collided = [FAULTS["collision"]["receiver"]] if "collision" in FAULTS else []
    return sorted([*FAULTS.get("stub", []), *held, *collided])


MODES_BATCHED = {
    "batched": batched,
    "batched-cache-hit": batched_cache_hit,
    "batched-dup": batched_dup,
    "batched-collision": batched_collision,
    "healthy-batched": healthy_batched,
    "stats": stats,
}


def _seats() -> dict[str, int]:
    """VLLM_RUN_MAX_SEQS: the engine's seats (default 8; `default` leaves vLLM's own, unlogged)."""
    seats = os.environ.get("VLLM_RUN_MAX_SEQS", "8")
    return {} if seats == "default" else {"max_num_seqs": int(seats)}


def _budget() -> dict[str, Any]:
    """VLLM_RUN_MAX_BATCHED: a token budget per step (prompts longer than it are chunked)."""
    most = os.environ.get("VLLM_RUN_MAX_BATCHED")
    return {"max_num_batched_tokens": int(most), "enable_chunked_prefill": True} if most else {}


def _pool_blocks(mode: str, small: bool) -> int | None:
    """VLLM_RUN_POOL_BLOCKS: the pool in blocks of BLOCK tokens (default 40 for the batched
    modes, 24 for the others; `default` leaves the engine's own, sized from the memory it is
    given)."""
    blocks = os.environ.get("VLLM_RUN_POOL_BLOCKS", str(40 if mode in MODES_BATCHED else 24))
    if blocks == "default" or not small:
        return None
    return int(blocks) * BLOCK // ENGINE_BLOCK


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
        block_size=ENGINE_BLOCK,
        enable_prefix_caching=os.environ.get("VLLM_RUN_PREFIX_CACHING", "1") == "1",
        enforce_eager=True,
        max_model_len=512,
        num_gpu_blocks_override=_pool_blocks(mode, small),
        seed=0,
        disable_log_stats=mode != "stats",
        **_seats(),
        **_budget(),
    )
    gw = Gateway(llm.llm_engine)
    t0 = time.time()
    modes = {"healthy": healthy, "faults": faults, "bench": bench, **MODES_BATCHED}
    modes[mode](gw, random.Random(int(os.environ.get("VLLM_RUN_SEED", "7"))))
    FAULTS["victims"] = victims()
    if "collision" in FAULTS:  # the engine's usage says whether the collision was served
        FAULTS["collision"]["cached_tokens"] = gw.rows[FAULTS["collision"]["receiver"]][
            "cached_tokens"
        ]
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
                "most_in_flight": gw.most_in_flight,
                "stats_calls": gw.stats_calls,
                "sampling": "sampled" if SAMPLED else "greedy",
            },
            indent=1,
        )
    )
    del llm


if __name__ == "__main__":
    main()
