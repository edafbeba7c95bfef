"""Page pools shared by the simulator and reconstruction: a model of SGLang's paged KV allocator
and radix prefix cache.

Facts followed (docs/engines.md): the allocator hands out token-slot ids in whole pages; page 0 is
reserved as padding and never handed out; freed pages go back to the front of the free list, so
the most recently freed pages are reused first; freed KV is never zeroed (the simulator keeps no
contents here at all: what a slot holds is the ledger's business). The radix cache keeps the pages
of page-aligned prompt prefixes after their writer finished, shares them with later requests of
the same prefix, and evicts least recently used entries without active sharers when pages run
short."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from forensics.engines import pool_kernels as K


class PagePool:
    """A LIFO free list of pages with a reference count per page."""

    def __init__(self, pool_slots: int, page_size: int):
        self.page_size = page_size
        self.n_pages = pool_slots // page_size
        # the stack's top is its end; page 1 on top first, page 0 never in it
        self.stack = np.arange(self.n_pages - 1, 0, -1, dtype=np.int64)
        self.top = len(self.stack)
        self.refs = np.zeros(self.n_pages, dtype=np.int16)

    @property
    def free_pages(self) -> int:
        return self.top

    @property
    def usable_slots(self) -> int:
        return (self.n_pages - 1) * self.page_size

    def alloc(self, k: int) -> np.ndarray | None:
        """Pop k pages (the most recently freed first), or None when too few are free."""
        if k > self.top:
            return None
        pages = K.pop_pages(self.stack, self.top, self.refs, k)
        self.top -= k
        return pages

    def alloc_many(self, ks: list[int]) -> list[np.ndarray | None]:
        """alloc(k) for each k in turn (a stretch of allocations with no free between)."""
        return [self.alloc(k) for k in ks]

    def take(self, page: int) -> None:
        """Add a holder to a page that is already in use (the double-allocation bug)."""
        self.refs[page] += 1

    def release(self, pages: np.ndarray) -> None:
        """Drop one holder of each page; pages nobody holds go to the front of the free list,
        in the given order (the first of them is handed out first)."""
        self.top = int(K.push_pages(self.stack, self.top, self.refs, pages))

    def copy(self) -> PagePool:
        """An independent pool in the same state."""
        new = PagePool.__new__(PagePool)
        new.page_size, new.n_pages, new.top = self.page_size, self.n_pages, self.top
        new.stack, new.refs = self.stack.copy(), self.refs.copy()
        return new

    def key(self) -> bytes:
        """The free list in its order: pools with equal keys answer every later allocation
        alike (holder counts are the caller's to compare)."""
        return self.stack[: self.top].tobytes()

    def close(self) -> None:
        """Nothing to give back for a pool kept here."""


@dataclass
class CacheEntry:
    pages: np.ndarray
    writer: int  # request index that wrote the prefix
    hash_id: int
    sharers: int = 0


class RadixCache:
    """Cached page-aligned prefixes by prefix key (the template id), least recently used first."""

    def __init__(self, pool: PagePool):
        self.pool = pool
        self.entries: OrderedDict[int, CacheEntry] = OrderedDict()

    def lookup(self, key: int) -> CacheEntry | None:
        entry = self.entries.get(key)
        if entry is not None:
            self.entries.move_to_end(key)
        return entry

    def insert(self, key: int, entry: CacheEntry) -> None:
        """Keep the entry's pages (one more holder each) until eviction."""
        self.pool.refs[entry.pages] += 1
        self.entries[key] = entry

    def evict_for(self, need: int) -> None:
        """Evict idle entries, oldest first, until `need` pages are free or none is left."""
        for key in [k for k, e in self.entries.items() if e.sharers == 0]:
            if self.pool.free_pages >= need:
                return
            self.pool.release(self.entries.pop(key).pages)
