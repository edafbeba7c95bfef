"""Which kept runs make an SGLang node's lists (forensics/reconstruct/ways.py), by hand: the
release's way's where the node names one and its runs were kept, else every kept run."""

from __future__ import annotations

from forensics.options import FreeList
from forensics.reconstruct.ways import chosen, listed_runs

KEPT = ["staged", "front", "staged", "front"]


def test_the_releases_way_makes_the_lists_and_the_rest_is_followed():
    choice = chosen(FreeList.VERSION, "sglang", ("0.5.9", FreeList.STAGED), "decode")
    assert choice.explored is FreeList.ANY and choice.listed == "staged"
    assert "SGLang 0.5.9 builds a decode node's allocator" in choice.note
    taken = listed_runs(KEPT, choice, "0.5.9")
    assert taken.runs == [0, 2] and taken.way == "staged" and taken.note == ""


def test_a_release_whose_way_the_log_dropped_is_listed_over_every_kept_way():
    choice = chosen(FreeList.VERSION, "sglang", ("0.4.9", FreeList.FRONT), "decode")
    taken = listed_runs(["staged", "staged"], choice, "0.4.9")
    assert taken.runs == [0, 1] and taken.way is None
    assert "as SGLang 0.4.9 builds (front) fit the log worse" in taken.note


def test_no_release_or_a_stated_way_lists_every_run_followed():
    for version in (None, "sglang-0.5.9"):
        choice = chosen(FreeList.VERSION, "sglang", (version, None), "decode")
        assert choice.explored is FreeList.ANY and choice.listed is None
        assert "no SGLang release named for this node" in choice.note
        assert listed_runs(KEPT, choice, version) == ([0, 1, 2, 3], None, "")
    for stated in (FreeList.ANY, FreeList.FRONT):
        choice = chosen(stated, "sglang", ("0.5.9", FreeList.STAGED), "decode")
        assert (choice.explored, choice.listed, choice.note) == (stated, None, "")
    # another engine's node: the option is not an SGLang one
    assert chosen(FreeList.VERSION, "vllm", ("0.32.0", None), "unified").listed is None
