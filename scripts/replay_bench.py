"""Replay timings: time per suspect and tokens per second, on one device or compared across two.

    python scripts/replay_bench.py --db OUT/case.duckdb --device cuda --compare cpu
    python scripts/replay_bench.py --synthetic 4 --context 2048 --device cpu
    python scripts/replay_bench.py --speed --model random-1b --device cuda \
        --contexts 8192,131072,1048576 --leakers 1,1,64

--speed prints, per context, the model's own prefill tokens/s (one SDPA forward pass, the
limit), the replay tokens/s of one stub suspect that read `leakers` requests' KV over the whole
context, and their ratio (see forensics/replay/speed.py). --model takes 'test', a model folder,
or random-1b / random-tiny: a Llama shape with random weights made on the device (--dtype, default
bfloat16 on CUDA and float32 on a CPU).

--db replays every suspect of an analysed case (on copies: the case is not changed).
--synthetic N builds a case of N leaker/receiver pairs (each receiver a 1-token stub whose
decode read its leaker's `context` tokens of KV), ingests it and replays the receivers.
With --compare, the second device must give the same verdicts and output hashes (exit 1 if not).
--truth CSV names the suspects (first column) when the case has no analysis tables.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

from forensics.db import connect  # noqa: E402
from forensics.ingest.load import ingest_case  # noqa: E402
from forensics.replay import SpeedOptions  # noqa: E402
from forensics.replay.decode import greedy_decode, prefill_first_token  # noqa: E402
from forensics.replay.stage import run_case_replay  # noqa: E402
from forensics.replay.testmodel import TEST_MODEL_NAME, build_test_model  # noqa: E402
from forensics.replay.verdicts import Verdict  # noqa: E402


def synthetic_case(folder: Path, pairs: int, context: int, n_out: int) -> list[str]:
    """Write a case folder; return the receivers' request ids."""
    model = build_test_model("cpu")
    rng = np.random.default_rng(7)
    requests, events, contents = [], [], []
    for i in range(pairs):
        leak, recv, base = f"L{i:03d}", f"R{i:03d}", i * (context + 8)
        prompt = rng.integers(0, 384, context).tolist()
        out = greedy_decode(
            model,
            {leak: prompt},
            [(leak, p) for p in range(context)],
            prefill_first_token(model, prompt),
            n_out,
        )
        stub = [int(rng.integers(0, 384))]
        slots = [(recv, 0)] + [(leak, p) for p in range(1, context)]
        leaked = greedy_decode(
            model, {recv: stub, leak: prompt + out}, slots, prefill_first_token(model, stub), n_out
        )
        requests += [(leak, "acct-a", context), (recv, "acct-b", context)]
        contents += [
            {"request_id": leak, "prompt_token_ids": prompt, "output_token_ids": out},
            {
                "request_id": recv,
                "prompt_token_ids": rng.integers(0, 384, context).tolist(),
                "output_token_ids": leaked,
                "processed_token_ids": stub,
            },
        ]
        t = 4 * i
        events += [
            (t, leak, "write", base, context, 0),
            (t + 1, leak, "free", base, context, ""),
            (t + 2, recv, "write", base, 1, 0),
            (t + 3, recv, "read", base, context, 0),
        ]
    _write(folder, requests, events, contents, n_out)
    return [f"R{i:03d}" for i in range(pairs)]


def _write(folder: Path, requests: list, events: list, contents: list, n_out: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    head = (
        "request_id,account_id,model,received_at,http_status,prompt_tokens,"
        "completion_tokens,decode_node\n"
    )
    rows = [
        f"{r},{a},{TEST_MODEL_NAME},2026-08-27T10:00:00Z,200,{n},{n_out},d1\n"
        for r, a, n in requests
    ]
    (folder / "requests.csv").write_text(head + "".join(rows))
    head = "seq,ts,node,request_id,op,slot_start,slot_count,pos_start\n"
    rows = [
        f"{s},2026-08-27T10:00:{s % 60:02d}Z,d1,{r},{op},{lo},{n},{p}\n"
        for s, r, op, lo, n, p in events
    ]
    (folder / "kv_events.csv").write_text(head + "".join(rows))
    (folder / "contents.jsonl").write_text("".join(json.dumps(c) + "\n" for c in contents))


def replay_on(
    db: Path, model: str | None, device: str, requests: list[str] | None, work: Path
) -> list:
    copy = work / f"{device.replace(':', '_')}.duckdb"
    shutil.copy(db, copy)
    con = connect(copy)
    try:
        started = time.perf_counter()
        run = run_case_replay(con, model, device, requests)
        total = time.perf_counter() - started
    finally:
        con.close()
    print(
        f"\n{device}: {len(run.results)} suspect(s) in {total:.2f} s "
        f"(model load included; first suspect includes warm-up)"
    )
    print(f"{'request':<34}{'verdict':<16}{'seconds':>9}{'tokens':>9}{'tokens/s':>11}")
    for r in run.results:
        print(
            f"{r.request_id:<34}{r.verdict:<16}{r.seconds:>9.3f}{r.tokens:>9}"
            f"{(r.tokens_per_s or 0):>11.1f}"
        )
    counts = {v: sum(r.verdict == v for r in run.results) for v in Verdict}
    others = "".join(f", {n} {v}" for v, n in counts.items() if n and v != Verdict.CONFIRMED)
    print(f"{device}: {counts[Verdict.CONFIRMED]} of {len(run.results)} confirmed{others}")
    done = [r for r in run.results if r.seconds > 0]
    if done:
        secs, toks = sum(r.seconds for r in done), sum(r.tokens for r in done)
        print(f"mean {secs / len(done):.3f} s per replayed suspect, {toks / secs:.1f} tokens/s")
    return run.results


def _has_suspect_tables(db: Path) -> bool:
    from forensics.casedb.sql import tables

    con = connect(db, read_only=True)
    try:
        return bool({"exposures", "screening"} & set(tables(con, views=True)))
    finally:
        con.close()


def _first_column(path: Path) -> list[str]:
    lines = path.read_text(encoding="utf-8").splitlines()[1:]
    return sorted({line.split(",", 1)[0] for line in lines if line.strip()})


def speed(args: argparse.Namespace) -> int:
    import torch

    from forensics.replay import speed

    if args.device == "cpu" and args.threads:
        torch.set_num_threads(args.threads)
    options = SpeedOptions(
        args.model or SpeedOptions.model, args.contexts, args.leakers, args.output_tokens
    )
    rows = speed.run(
        options, args.device, sys.stdout, sys.stderr, args.dtype, args.device_map, args.repeat
    )
    return 0 if all(r.verdict == "confirmed" for r in rows) else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--speed", action="store_true", help="replay vs plain prefill speed")
    parser.add_argument("--contexts", default=SpeedOptions.contexts)
    parser.add_argument(
        "--leakers", default=SpeedOptions.leakers, help="writers per suspect, per context"
    )
    parser.add_argument("--dtype", help="bfloat16, float16 or float32 (random models)")
    parser.add_argument("--device-map", help="auto: spread a model folder over the GPUs")
    parser.add_argument("--threads", type=int, help="CPU threads (default: torch's)")
    parser.add_argument("--repeat", type=int, default=1, help="best of N runs (--speed)")
    parser.add_argument("--db", type=Path)
    parser.add_argument("--synthetic", type=int, default=0)
    parser.add_argument("--context", type=int, default=2048)
    parser.add_argument("--output-tokens", type=int, default=16)
    parser.add_argument("--model", help="model directory or 'test' (default: as the case says)")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--compare")
    parser.add_argument(
        "--truth",
        type=Path,
        help="CSV whose first column lists suspects, used "
        "when the case has no exposures or screening table",
    )
    args = parser.parse_args()
    if args.speed:
        return speed(args)
    work = Path(tempfile.mkdtemp(prefix="replay-bench-"))
    requests = None
    db = args.db
    if args.synthetic:
        requests = synthetic_case(work / "case", args.synthetic, args.context, args.output_tokens)
        db = work / "case.duckdb"
        ingest_case(work / "case", db)
    if db is None:
        parser.error("give --db CASE.duckdb or --synthetic N")
    if requests is None and args.truth is not None and not _has_suspect_tables(db):
        requests = _first_column(args.truth)
    first = replay_on(db, args.model, args.device, requests, work)
    if not args.compare:
        return 0
    second = replay_on(db, args.model, args.compare, requests, work)
    key = [(r.request_id, r.verdict, r.contaminated_sha256, r.clean_sha256) for r in first]
    same = key == [(r.request_id, r.verdict, r.contaminated_sha256, r.clean_sha256) for r in second]
    print(
        f"\n{args.device} and {args.compare} verdicts and output hashes "
        f"{'identical' if same else 'DIFFER'}"
    )
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
