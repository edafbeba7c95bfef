"""Where an SGLang release's allocator puts freed pages back, for a node's role and page size.

Read from the released SGLang packages (`sglang/srt/mem_cache/allocator.py` of each):

- before 0.4.9.post4, `PagedTokenToKVPoolAllocator.free` puts freed pages at the front of the
  free list (the most recently freed handed out first) and `TokenToKVPoolAllocator.free`, the
  allocator for a page size of 1, at its end;
- from 0.4.9.post4 to 0.5.0rc1 both stage every free (`release_pages`) and merge it back sorted
  when an allocation runs short, on every node;
- from 0.5.0rc2 they take `need_sort`, which SGLang sets for a disaggregated prefill or decode
  node only: those stage and sort, any other node frees to the front (paged) or the end (a page
  size of 1), as before 0.4.9.post4.

`--sglang-free-list version` (the default) lists the reads of the way this gives for the version
the nodes table or the engine's log names, and keeps what only the other ways read apart
(ways.py); a version it cannot read gives none, and every way's reads are listed."""

from __future__ import annotations

import re

from forensics.options import FreeList

_VERSION = re.compile(
    r"^v?(?P<release>\d+(?:\.\d+){0,3})(?:[.-]?(?P<kind>a|b|rc|post|dev)(?P<n>\d*))?(?:\+[\w.]+)?$"
)
_KIND = {"dev": 0, "a": 1, "b": 2, "rc": 3, "": 4, "post": 5}  # "": the release itself

Key = tuple[tuple[int, ...], int, int]

STAGED_EVERYWHERE = "0.4.9.post4"  # first release whose allocators stage every free
NEED_SORT = "0.5.0rc2"  # first release that stages only on a disaggregated node


def version_key(version: str) -> Key | None:
    """A comparable key for an SGLang version string (None where it is not one)."""
    m = _VERSION.match(version.strip().lower())
    if m is None:
        return None
    release = tuple(int(p) for p in m["release"].split("."))
    release += (0,) * (3 - len(release))
    return release, _KIND[m["kind"] or ""], int(m["n"] or 0)


def release_free_list(version: str | None, role: str, page_size: int) -> FreeList | None:
    """The way this SGLang release frees pages on a node of this role and page size; None
    where the version is missing or not a version."""
    key = version_key(version) if version else None
    if key is None:
        return None
    unstaged = FreeList.BACK if page_size == 1 else FreeList.FRONT
    if key < _key(STAGED_EVERYWHERE):
        return unstaged
    if key < _key(NEED_SORT) or role in ("prefill", "decode"):
        return FreeList.STAGED
    return unstaged


def _key(version: str) -> Key:
    key = version_key(version)
    assert key is not None
    return key
