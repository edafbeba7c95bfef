"""What the ledger tap costs a real vLLM (CPU build): tokens/s with the tap recording and with
it idle, in alternating rounds inside one engine (so that start-up and a shared machine's load
drift weigh on both alike), and the tap's bytes on disk per million tokens served.

Run it with the engines environment's python (scripts/engines_venv.sh builds it):

    KVFORENSICS_TAP_DIR=/tmp/tap-bench $ENGINES/bin/python benchmarks/bench_tap_vllm.py \
        [--rounds 6] [--requests 32] [--model DIR]

The model is the tests' tiny random-weight Llama (written to --model when missing). Each round
serves the same number of requests (shared 64-token prefixes, 16 to 96 more prompt tokens,
64 output tokens); the tap is switched off between rounds by detaching it from the scheduler.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))


def serve(engine: Any, rng: random.Random, tag: str, n: int) -> tuple[float, int, int]:
    from vllm import SamplingParams

    prefixes = [[rng.randrange(3, 512) for _ in range(64)] for _ in range(4)]
    prompt_tokens = 0
    for k in range(n):
        prompt = prefixes[k % 4] + [rng.randrange(3, 512) for _ in range(rng.randrange(16, 96))]
        prompt_tokens += len(prompt)
        params = SamplingParams(max_tokens=64, temperature=0.0, ignore_eos=True)
        engine.add_request(f"{tag}-{k}", {"prompt_token_ids": prompt}, params)
    t0 = time.perf_counter()
    generated = 0
    while engine.has_unfinished_requests():
        for out in engine.step():
            if out.finished:
                generated += len(out.outputs[0].token_ids)
    return time.perf_counter() - t0, generated, prompt_tokens


def timed(method: Any, spent: list[float]) -> Any:
    def wrapped(*args: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return method(*args)
        finally:
            spent[0] += time.perf_counter() - t0

    return wrapped


def disk_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*.parquet"))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--requests", type=int, default=32)
    ap.add_argument("--model", type=Path, default=Path("/tmp/kvforensics-tiny-llama"))
    args = ap.parse_args()
    tap_dir = os.environ.get("KVFORENSICS_TAP_DIR")
    if not tap_dir:
        sys.exit("set KVFORENSICS_TAP_DIR: the tap must be on when the engine starts")
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # the scheduler in this process
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    from vllm_run import write_model

    if not (args.model / "config.json").is_file():
        write_model(args.model)
    from vllm import LLM

    llm = LLM(
        model=str(args.model),
        skip_tokenizer_init=True,
        dtype="float32",
        block_size=32,
        enable_prefix_caching=True,
        enforce_eager=True,
        max_model_len=512,
        seed=0,
    )
    engine = llm.llm_engine
    scheduler = engine.engine_core.engine_core.scheduler
    tap = scheduler._kvforensics_tap
    spent = [0.0]
    for name in ("step", "free"):
        setattr(tap, name, timed(getattr(tap, name), spent))
    rng = random.Random(3)
    _s, warm_out, warm_prompt = serve(engine, rng, "warmup", args.requests)
    spent[0] = 0.0
    rates: dict[bool, list[float]] = {True: [], False: []}
    busy = {True: 0.0, False: 0.0}
    tokens = {True: 0, False: 0}
    for k in range(2 * args.rounds):
        on = k % 2 == 0
        scheduler._kvforensics_tap = tap if on else None
        scheduler.kv_cache_manager._kvforensics_tap = tap if on else None
        seconds, generated, prompt = serve(engine, rng, f"r{k}", args.requests)
        rates[on].append(generated / seconds)
        busy[on] += seconds
        tokens[on] += generated + prompt
    scheduler._kvforensics_tap = tap
    tap.rec.close()
    for on in (False, True):
        r = rates[on]
        print(
            f"tap {'on ' if on else 'off'}: tokens/s median {statistics.median(r):.1f}, "
            f"min {min(r):.1f}, max {max(r):.1f} over {len(r)} rounds"
        )
    slow = 1 - statistics.median(rates[True]) / statistics.median(rates[False])
    print(f"slowdown (median over median): {100 * slow:.1f} %")
    print(
        f"time inside the tap's hooks: {spent[0]:.3f} s of {busy[True]:.1f} s served with it "
        f"on = {100 * spent[0] / busy[True]:.2f} %"
    )
    served = tokens[True] + warm_out + warm_prompt  # the warm-up round was recorded too
    size = disk_bytes(Path(tap_dir))
    events = tap.rec.recorded
    print(
        f"disk: {size} bytes, {events} events ({size / events:.1f} bytes/event) for "
        f"{served} tokens served (prompt + generated) = "
        f"{size / served * 1e6 / 2**20:.1f} MiB per million tokens"
    )


if __name__ == "__main__":
    main()
