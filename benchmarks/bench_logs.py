"""Read speed of the engine-log parser: prints lines per second for a synthetic SGLang log
(mostly batch lines, some noise and rejections, two TP ranks) of --lines lines; with
--prefill-node, a disaggregated prefill node's log: every line a prefill batch of TP rank 0,
whose counts are kept (engine_counters).

    python benchmarks/bench_logs.py --lines 200000 [--prefill-node]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from forensics.logs.read import read_logs

LINES = [
    "[2026-08-27 10:14:03 TP{r}] Prefill batch, #new-seq: 1, #new-token: 8192, #cached-token: 0, "
    "token usage: 0.01, #running-req: 0, #queue-req: 0, input throughput (token/s): 9120.55",
    "[2026-08-27 10:14:04 TP{r}] Decode batch, #running-req: 12, #token: 91220, token usage: "
    "0.13, cuda graph: True, gen throughput (token/s): 511.20, #queue-req: 0",
    '[2026-08-27 10:14:05] INFO:     10.0.3.17:51522 - "POST /generate HTTP/1.1" 200 OK',
    "[2026-08-27 10:14:05 TP{r}] Request {i:032x} exceeds the maximum number of tokens: "
    "712455 > 681216",
]
HEAD = [
    "[2026-08-27 09:58:01] server_args={'model_path': 'm', 'context_length': 1048576, "
    "'page_size': 64, 'disaggregation_mode': 'prefill'}",
    "[2026-08-27 09:58:42 TP0] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 681280, "
    "K size: 10.40 GB, V size: 10.40 GB",
    "[2026-08-27 09:58:51 TP0] max_total_num_tokens=681280, chunked_prefill_size=8192, "
    "max_prefill_tokens=16384, max_running_requests=64, context_len=1048576, "
    "available_gpu_mem=12.10 GB",
]


def write_log(path: Path, n: int, prefill_node: bool = False) -> None:
    with path.open("w") as out:
        out.write("\n".join(HEAD) + "\n")
        for i in range(n - len(HEAD)):
            if prefill_node:
                out.write(LINES[0].format(r=0) + "\n")
                continue
            template = LINES[i % 3] if i % 50 else LINES[3]
            out.write(template.format(r=i % 2, i=i) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--lines", type=int, default=200_000)
    parser.add_argument("--prefill-node", action="store_true", help="prefill batch lines only")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "prefill-0.log"
        write_log(path, args.lines, args.prefill_node)
        start, cpu = time.perf_counter(), time.process_time()
        summary = read_logs([(path, path.name, path.name)])
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    print(f"lines: {summary.lines_read}")
    print(f"seconds: {seconds:.3f}")
    print(f"cpu_seconds: {cpu:.3f}")
    print(f"lines_per_second: {summary.lines_read / seconds:,.0f}")
    print(f"lines_per_cpu_second: {summary.lines_read / cpu:,.0f}")
    print(f"evidence_rows: {len(summary.evidence)}")


if __name__ == "__main__":
    main()
