"""Which scheduler and allocator variants a node is rebuilt on (forensics/reconstruct/paged.py):
every way SGLang's allocator may put freed pages back, SGLang's decode headroom only on an
SGLang decode node, and a stated free list alone."""

from __future__ import annotations

import pytest

from forensics.errors import UsageError
from forensics.options import FreeList
from forensics.reconstruct.paged import _combos


def _ways(combos):
    return {(alloc, need_sort) for _, (alloc, _, need_sort) in combos}


def _lines(combos):
    return {policy for (_, policy, _), _ in combos}


def test_an_sglang_decode_node_follows_every_free_list_and_headroom():
    combos = _combos("sglang", "decode", 1440, 16, FreeList.ANY)
    assert _ways(combos) == {("sglang", True), ("sglang", False)}
    assert {"reserve:512", "reserve-held:512", "reserve:128"} <= _lines(combos)
    one_token = _combos("sglang", "decode", 1440, 1, FreeList.ANY)
    assert _ways(one_token) == {("sglang", True), ("sglang", False), ("sglang-token", False)}
    # an allocation that still reaches the allocator matters only where frees are staged
    assert all(not probe for (_, _, probe), (_, _, need_sort) in combos if not need_sort)


@pytest.mark.parametrize(("kind", "role"), [("sglang", "prefill"), ("vllm", "decode")])
def test_headroom_is_kept_only_by_an_sglang_decode_node(kind, role):
    combos = _combos(kind, role, 1440, 16, FreeList.ANY)
    assert combos and not any(p.startswith("reserve") for p in _lines(combos))
    if kind == "vllm":
        assert _ways(combos) == {("vllm", True)}


def test_a_stated_free_list_is_the_only_one_followed():
    assert _ways(_combos("sglang", "decode", 1440, 16, FreeList.FRONT)) == {("sglang", False)}
    assert _ways(_combos("sglang", "decode", 1440, 1, FreeList.BACK)) == {("sglang-token", False)}
    with pytest.raises(UsageError, match="pages hold 16 tokens"):
        _combos("sglang", "decode", 1440, 16, FreeList.BACK)


def test_a_logged_headroom_adds_its_lines_and_removes_none():
    every = _lines(_combos("sglang", "decode", 1440, 16, FreeList.ANY))
    logged = _lines(_combos("sglang", "decode", 1440, 16, FreeList.ANY, 300))
    assert logged == every | {"reserve:300", "reserve-held:300"}
    assert _lines(_combos("sglang", "decode", 1440, 16, FreeList.ANY, 512)) == every
    assert _lines(_combos("sglang", "decode", 1440, 16, FreeList.ANY, 0)) == every
    prefill = _lines(_combos("sglang", "prefill", 1440, 16, FreeList.ANY, 300))
    assert not any(p.startswith("reserve") for p in prefill)
