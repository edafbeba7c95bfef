"""Page pools whose free-list order comes from a serving engine's real allocator class.

`--allocator lifo` keeps the simulator's own LIFO `PagePool`. `sglang` and `vllm` hand every
allocation and free to the real class (SGLang's `PagedTokenToKVPoolAllocator`, vLLM's
`BlockPool` and its free-block queue) in a driver process (forensics.engines); the simulator
keeps only the holder counts (prefix-cache sharing, the double-allocation bug) and sends a
page back when nobody holds it any more. Every node of the simulated cluster is a
disaggregated prefill or decode node, so SGLang's pools stage their frees (need_sort);
reconstruction also builds them without it, and SGLang's allocator for a page size of 1
(`sglang-token`), since which one a node ran is not in its request log."""

from __future__ import annotations

import numpy as np

from forensics.engines.client import EngineAllocators
from forensics.engines.pools import PagePool
from forensics.errors import UsageError

ALLOCATORS = ("lifo", "sglang", "vllm")


class EnginePagePool(PagePool):
    """A PagePool whose free list lives in a real engine allocator."""

    def __init__(
        self,
        pool_slots: int,
        page_size: int,
        drv: EngineAllocators,
        kind: str,
        need_sort: bool = True,
    ):
        # SGLang's pool size (max_total_num_tokens, as its log states it) leaves out its padding
        # page 0, which it keeps beside the pool; vLLM's block count includes its null block 0.
        padding = page_size if kind.startswith("sglang") else 0
        super().__init__(pool_slots + padding, page_size)
        self.drv = drv
        self.pool = drv.new_pool(kind, self.n_pages, page_size, need_sort=need_sort)
        self.stack = np.empty(0, np.int64)  # unused: the engine keeps the free list
        self.top = self.n_pages - 1  # free pages, counted here
        self.probe = False  # whether an allocation too big for the free pages is still tried

    def alloc(self, k: int) -> np.ndarray | None:
        if k > self.top:
            if self.probe:  # the call reaches the allocator: SGLang's merges its staged frees
                self.drv.alloc(self.pool, k)
            return None
        return self._taken(k, self.drv.alloc(self.pool, k))

    def _taken(self, k: int, got: list[int] | None) -> np.ndarray:
        """The driver's answer to an allocation of k pages that fit: held and counted."""
        if got is None:
            raise RuntimeError(f"engine allocator refused {k} pages with {self.top} free")
        pages = np.asarray(got, dtype=np.int64)
        self.refs[pages] += 1
        self.top -= k
        return pages

    def alloc_many(self, ks: list[int]) -> list[np.ndarray | None]:
        """alloc(k) for each k in turn, in one exchange with the driver: the allocations
        that fit the free pages counted here are sent together (the driver makes them in
        order), the rest answered as alloc answers them."""
        fit, free = 0, self.top
        while fit < len(ks) and ks[fit] <= free:
            free -= ks[fit]
            fit += 1
        if fit < 2:
            return [self.alloc(k) for k in ks]
        answers = self.drv.alloc_many(self.pool, ks[:fit])
        out: list[np.ndarray | None] = [
            self._taken(k, got) for k, got in zip(ks[:fit], answers, strict=True)
        ]
        return out + [self.alloc(k) for k in ks[fit:]]

    def release(self, pages: np.ndarray) -> None:
        pages = np.asarray(pages, dtype=np.int64)
        np.subtract.at(self.refs, pages, 1)
        free = [int(p) for p in pages if self.refs[p] == 0]
        self.drv.free(self.pool, free)
        self.top += len(free)

    def copy(self) -> EnginePagePool:
        """An independent pool in the same state: the engine allocator copied in the driver."""
        new = EnginePagePool.__new__(EnginePagePool)
        new.page_size, new.n_pages, new.top = self.page_size, self.n_pages, self.top
        new.stack, new.refs = self.stack, self.refs.copy()
        new.drv, new.probe = self.drv, self.probe
        new.pool = self.drv.clone(self.pool)
        return new

    def key(self) -> bytes:
        return self.drv.key(self.pool).encode()

    def close(self) -> None:
        self.drv.drop(self.pool)


def make_pools(
    kind: str, sizes: list[int], page_size: int
) -> tuple[list[PagePool], EngineAllocators | None]:
    """One pool per node; the driver (to close after the run) when the pools are real ones."""
    if kind not in ALLOCATORS:
        raise UsageError(f"unknown --allocator '{kind}'; known: {', '.join(ALLOCATORS)}")
    if kind == "lifo":
        return [PagePool(s, page_size) for s in sizes], None
    drv = EngineAllocators()
    pools: list[PagePool] = [EnginePagePool(s, page_size, drv, kind) for s in sizes]
    return pools, drv
