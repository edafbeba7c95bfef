"""Cases made by SGLang's own paged KV allocator under a scheduler written apart from the
project's simulator and reconstruction: an independent generator of ledger-free cases.

    python tests/support/sglang_cases.py OUT_DIR [--requests 1500] [--accounts 1000] [--seed 1]
        [--days 1] [--bursts 0.3] [--jitter-us 1000] [--page-size 16]
        [--allocator paged|token] [--need-sort 1|0] [--engine-version V]

Runs in the engines' environment (scripts/engines_venv.sh): the standard library, torch and
sglang only, nothing of the project. A disaggregated cluster of two prefill and two decode
nodes; on a decode node, as SGLang's disaggregated decode does:

- the decode node pre-allocates the billed prompt's pages when the request arrives
  (`alloc(pages * page_size)`), waiting in a FIFO queue when the pool is short;
- the prefill node computes the prompt, or, when the prompt is longer than its pool, a 1-token
  stub (the incident's fault), and the transfer writes what it computed;
- the first decode step reads every position of the billed prompt; each later step writes one
  token, and a step whose position starts a new page allocates that page (`alloc(page_size)`)
  at that step's time: decode pages are allocated one by one while other requests run;
- at completion every slot the request holds is freed in one `free` call;
- the allocator is `PagedTokenToKVPoolAllocator(size=max_total_num_tokens, page_size, ...,
  need_sort=True)`, as SGLang builds it for disaggregated nodes, and `nodes.csv` gives
  `pool_slots` as SGLang's log does (`max_total_num_tokens`, page 0 not counted).
  `--need-sort 0` builds it as SGLang does without disaggregation (freed pages go back at the
  front of the free list, the most recently freed handed out first); `--allocator token` (one
  token per page only) is `TokenToKVPoolAllocator`, which SGLang builds for a page size of 1
  (without need_sort, freed slots go back at the end of the free list);
- `nodes.csv` names the SGLang release that builds the allocator so for a disaggregated node:
  0.5.9 with need_sort (which stages), 0.4.9 without (a release from before staging, whose
  paged allocator frees to the front and one-token allocator to the end); `--engine-version V`
  names another (a case whose nodes table misnames its engine's release);
- `--reserved-decode-tokens R` admits a pre-allocation only while the free slots less R for
  every request holding pages cover it, as SGLang's prealloc queue keeps
  `--num-reserved-decode-tokens` of headroom for the running requests (default 0: no headroom).

The gateway log's times carry up to `--jitter-us` of noise. Truth (`truth.json`): for every
stub, each request whose data it read on its decode node (slot -> last writer), with accounts.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import heapq
import json
import random
from collections import deque
from pathlib import Path
from typing import Any

import torch
from sglang.srt.mem_cache.allocator import PagedTokenToKVPoolAllocator, TokenToKVPoolAllocator

PAGE = 16  # tokens per page, as SGLang is started with --page-size (its default is 1)
PREFILL_POOL, DECODE_POOL, CONTEXT = 688, 1440, 1049
START = dt.datetime(2026, 9, 1, tzinfo=dt.UTC)
ARRIVE, FIRST, STEP, DONE = 0, 1, 2, 3


class Decode:
    """One decode node: SGLang's allocator, the slots' last writers, a prealloc queue."""

    def __init__(self, name: str, page: int, allocator: str = "paged", need_sort: bool = True):
        self.name, self.ps = name, page
        if allocator == "token":
            assert page == 1, "TokenToKVPoolAllocator has one token per page"
            self.alloc = TokenToKVPoolAllocator(DECODE_POOL, torch.bfloat16, "cpu", None, need_sort)
        else:
            self.alloc = PagedTokenToKVPoolAllocator(
                DECODE_POOL, page, torch.bfloat16, "cpu", None, need_sort
            )
        self.writer: dict[int, int] = {}
        self.pages: dict[int, list[int]] = {}
        self.queue: deque[int] = deque()

    def take(self, n_pages: int) -> list[int] | None:
        got = self.alloc.alloc(n_pages * self.ps)
        return None if got is None else (got[:: self.ps] // self.ps).tolist()

    def free(self, i: int) -> None:
        pages = self.pages.pop(i)
        slots = (torch.tensor(pages)[:, None] * self.ps + torch.arange(self.ps)).reshape(-1)
        self.alloc.free(slots)

    def slot(self, i: int, pos: int) -> int:
        return self.pages[i][pos // self.ps] * self.ps + pos % self.ps


def traffic(args: argparse.Namespace, rng: random.Random) -> list[dict[str, Any]]:
    """Arrivals over the days (some in bursts), lengths, accounts, nodes."""
    span = args.days * 86_400e6
    reqs: list[dict[str, Any]] = []
    t = 0.0
    while len(reqs) < args.requests:
        t += rng.expovariate(args.requests / span)
        n = rng.randint(3, 9) if rng.random() < args.bursts else 1
        for _ in range(min(n, args.requests - len(reqs))):
            t += rng.uniform(0, 400_000) if n > 1 else 0
            long = rng.random() < 0.02
            prompt = rng.randint(PREFILL_POOL + 1, CONTEXT - 40) if long else rng.randint(8, 600)
            reqs.append(
                {
                    "t": int(t),
                    "account": f"acct-{int(args.accounts * rng.random() ** 2) + 1:04d}",
                    "prompt": prompt,
                    "out": rng.randint(4, 200),
                    "prefill": f"prefill-{rng.randrange(2)}",
                    "decode": rng.randrange(2),
                }
            )
    return reqs


def run(
    reqs: list[dict[str, Any]],
    rng: random.Random,
    page: int = PAGE,
    allocator: str = "paged",
    need_sort: bool = True,
    reserved: int = 0,
) -> dict[str, Any]:
    nodes = [Decode(f"decode-{k}", page, allocator, need_sort) for k in range(2)]
    heap: list[tuple[int, int, int, int]] = [(r["t"], ARRIVE, i, 0) for i, r in enumerate(reqs)]
    heapq.heapify(heap)
    truth: dict[int, dict[int, int]] = {}

    def start(i: int, t: int) -> None:
        """Pages held: the prefill runs (1 token for a stub), then the transfer and decode."""
        r = reqs[i]
        node = nodes[r["decode"]]
        r["stub"] = r["prompt"] > PREFILL_POOL
        done = 1 if r["stub"] else r["prompt"]
        for pos in range(done):
            node.writer[node.slot(i, pos)] = i
        first = t + 2_000 + done * 40 + rng.randint(0, 3_000)
        heapq.heappush(heap, (first, FIRST, i, 0))

    def admit(node: Decode, t: int) -> None:
        while node.queue:
            i = node.queue[0]
            need = -(-reqs[i]["prompt"] // node.ps)
            held = reserved * len(node.pages)  # headroom kept for the requests holding pages
            if held and node.alloc.available_size() - held < need * node.ps:
                return
            got = node.take(need)
            if got is None:
                return
            node.queue.popleft()
            node.pages[i] = got
            start(i, t)

    while heap:
        t, kind, i, k = heapq.heappop(heap)
        r = reqs[i]
        node = nodes[r["decode"]]
        if kind == ARRIVE:
            r["received"] = t
            node.queue.append(i)
            admit(node, t)
        elif kind == FIRST:
            r["first"] = t
            seen = {node.writer.get(node.slot(i, p), -1) for p in range(r["prompt"])}
            truth[i] = {w: 1 for w in seen if w not in (-1, i)}
            heapq.heappush(heap, (t + 25_000, STEP, i, 0))
        elif kind == STEP:
            pos = r["prompt"] + k  # the KV of the token fed at this step
            if k >= r["out"] - 1:
                r["done"] = t
                node.free(i)
                admit(node, t)
                continue
            if pos % node.ps == 0 and pos // node.ps >= len(node.pages[i]):
                extra = node.take(1)
                if extra is None:  # out of pages: the output is cut here
                    r["out"] = k + 1
                    heapq.heappush(heap, (t, STEP, i, k + 1))
                    continue
                node.pages[i] += extra
            node.writer[node.slot(i, pos)] = i
            heapq.heappush(heap, (t + 25_000, STEP, i, k + 1))
    return {
        "stubs": {
            str(i): {
                "leakers": sorted(truth[i]),
                "cross": sorted(w for w in truth[i] if reqs[w]["account"] != reqs[i]["account"]),
            }
            for i, r in enumerate(reqs)
            if r.get("stub")
        }
    }


def iso(t_us: int, rng: random.Random, jitter: int) -> str:
    t = START + dt.timedelta(microseconds=t_us + rng.randint(0, jitter))
    return t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def write(
    out: Path,
    reqs: list[dict[str, Any]],
    truth: dict[str, Any],
    jitter: int,
    page: int = PAGE,
    version: str = "0.5.9",
) -> None:
    out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(len(reqs))
    rid = [f"r{i:05d}" for i in range(len(reqs))]
    with open(out / "requests.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(
            "request_id account_id model received_at first_token_at completed_at http_status "
            "prompt_tokens completion_tokens prefill_node decode_node".split()
        )
        for i, r in enumerate(reqs):
            w.writerow(
                [
                    rid[i],
                    r["account"],
                    "llama-3-8b",
                    iso(r["received"], rng, jitter),
                    iso(r["first"], rng, jitter),
                    iso(r["done"], rng, jitter),
                    200,
                    r["prompt"],
                    r["out"],
                    r["prefill"],
                    f"decode-{r['decode']}",
                ]
            )
    with open(out / "nodes.csv", "w", newline="") as fh:
        fh.write("node,role,engine,engine_version,page_size,pool_slots,context_len\n")
        for k in range(2):
            fh.write(f"prefill-{k},prefill,sglang,{version},{page},{PREFILL_POOL},{CONTEXT}\n")
        for k in range(2):
            fh.write(f"decode-{k},decode,sglang,{version},{page},{DECODE_POOL},{CONTEXT}\n")
    accounts = sorted({r["account"] for r in reqs})
    with open(out / "accounts.csv", "w", newline="") as fh:
        fh.write("account_id,name\n" + "".join(f"{a},{a}\n" for a in accounts))
    named = {
        rid[int(s)]: {
            "account": reqs[int(s)]["account"],
            "leakers": [[rid[w], reqs[w]["account"]] for w in v["leakers"]],
        }
        for s, v in truth["stubs"].items()
    }
    (out / "truth.json").write_text(json.dumps({"stubs": named}, indent=1, sort_keys=True))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--requests", type=int, default=1500)
    ap.add_argument("--accounts", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--days", type=float, default=1.0)
    ap.add_argument("--bursts", type=float, default=0.3)
    ap.add_argument("--jitter-us", type=int, default=1_000)
    ap.add_argument("--page-size", type=int, default=PAGE)
    ap.add_argument("--allocator", choices=["paged", "token"], default="paged")
    ap.add_argument("--need-sort", type=int, choices=[0, 1], default=1)
    ap.add_argument("--reserved-decode-tokens", type=int, default=0)
    ap.add_argument("--engine-version", default=None)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    reqs = traffic(args, rng)
    truth = run(
        reqs, rng, args.page_size, args.allocator, bool(args.need_sort), args.reserved_decode_tokens
    )
    version = args.engine_version or ("0.5.9" if args.need_sort else "0.4.9")
    write(args.out, reqs, truth, args.jitter_us, args.page_size, version)


if __name__ == "__main__":
    main()
