"""Which of the ways an SGLang allocator may put freed pages back a node's lists are taken from.

Every way the page size allows is followed unless one is stated. Under `--sglang-free-list
version` (the default) the lists take the runs of the way the node's named SGLang release builds
for its role (freelist.py); the pairs only the other ways' runs have are kept apart
(`reconstructed_other_ways`) unless replay decides them, so a responder sees who would be a
possible leaker were the node not built as its release builds it. A node that names no release,
or whose log the release's way fits worse than another way, is listed over every way."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from forensics.options import FreeList

WAYS = {("sglang", True): "staged", ("sglang", False): "front", ("sglang-token", False): "back"}
_TAKEN = {
    FreeList.STAGED: "staged and merged sorted",
    FreeList.FRONT: "at the front",
    FreeList.BACK: "at the end",
}


@dataclass(frozen=True)
class Chosen:
    """The free lists a node is rebuilt on, and the one its lists are taken from."""

    explored: FreeList  # the ways the runs follow (any: every way the page size allows)
    listed: str | None  # the way whose runs make the lists (None: every way explored)
    note: str  # why, for the node's variants ("" where a way was stated)


def chosen(
    stated: FreeList, kind: str, release: tuple[str | None, FreeList | None], role: str
) -> Chosen:
    """The ways to follow on a node and the one to list by, from the option and the release
    the node names (version, and the way freelist.py gives for it)."""
    if stated is not FreeList.VERSION or kind != "sglang":
        return Chosen(stated, None, "")
    version, way = release
    if way is None:
        return Chosen(
            FreeList.ANY,
            None,
            f"no SGLang release named for this node ({_shown(version)}), so the lists take every "
            "way its allocator may put freed pages back",
        )
    return Chosen(
        FreeList.ANY,
        way.value,
        f"SGLang {version} builds a {role} node's allocator to put freed pages back "
        f"{_TAKEN[way]}: the lists take that way's runs; the pairs only the other ways' runs "
        "have are kept apart (reconstructed_other_ways) unless replay decided them",
    )


class Listed(NamedTuple):
    runs: list[int]  # positions among the kept runs
    way: str | None  # the way they follow (None: every way kept)
    note: str  # "" unless the release's way was not kept


def listed_runs(kept: Sequence[str | None], choice: Chosen, version: str | None) -> Listed:
    """Which of the runs kept (each by the way its pool frees, None for a pool of no SGLang
    way) make the lists: the release's way's, or, where none of them was kept (the release's
    way fits the log worse than another), every kept run, and a note that says so."""
    taken = [k for k, way in enumerate(kept) if choice.listed in (None, way)]
    if taken:
        return Listed(taken, choice.listed, "")
    return Listed(list(range(len(kept))), None, _unfitted(version, str(choice.listed)))


def _unfitted(version: str | None, way: str) -> str:
    """The note of a node whose log the release's way fits worse than another way."""
    return (
        f"the runs putting freed pages back as SGLang {version} builds ({way}) fit the log "
        "worse than another way's (more requests left waiting for pages at their first token), "
        "so the lists take every way that fits it best"
    )


def _shown(version: str | None, most: int = 40) -> str:
    """A version string as a note quotes it: none, or at most `most` characters."""
    if not version:
        return "none"
    return repr(version if len(version) <= most else version[:most] + "...")
