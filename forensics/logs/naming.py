"""Which node a log file belongs to, and in what order a node's files are read.

Rules, in order:
1. A mapping file (CSV with header `node,file_glob`): the first row whose glob matches the file's
   path relative to the folder given (or its bare name) names the node.
2. Otherwise the file name: drop `.gz` or `.zst`, a rotation number (`.1`),
   `.log`/`.txt`/`.out`/`.err`, a date stamp (`.2026-08-27`), then rank suffixes (`-tp0`,
   `_dp1_tp3`, `.rank2`), which become the file's ranks. `prefill-0-tp1.log.gz` is node
   `prefill-0`, ranks TP1.
3. When nothing is left, or only a generic word (`server`, `sglang`, `vllm`, `stdout`, …), the
   name of the folder holding the file is the node (`logs/decode-1/tp0.log` is `decode-1`).
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path, PurePosixPath

from forensics.errors import InputError
from forensics.logs.lines import Ranks

_ROTATION = re.compile(r"\.(\d{1,3})$")
_EXT = re.compile(r"\.(?:log|txt|out|err)$", re.IGNORECASE)
_DATE = re.compile(r"[._-]\d{4}-?\d{2}-?\d{2}(?:[T_-]\d{2}[-:]?\d{2}(?:[-:]?\d{2})?)?$")
_RANK_SUFFIX = re.compile(r"(?:^|[-_.])(tp|dp|pp|ep|rank)[-_]?(\d+)$", re.IGNORECASE)
GENERIC = frozenset(
    {
        "",
        "log",
        "logs",
        "server",
        "sglang",
        "vllm",
        "engine",
        "stdout",
        "stderr",
        "output",
        "console",
        "launch",
        "serve",
        "worker",
    }
)


@dataclass(frozen=True, order=True)
class LogFile:
    """A log file with its node, ranks taken from its name, and rotation number (0 = current)."""

    node: str
    ranks: Ranks
    rotation_order: int  # -rotation: older rotated files are read first
    rel: str  # path shown in provenance (relative to the folder or case)
    path: Path


def parse_name(name: str) -> tuple[str, Ranks, int]:
    """(stem, ranks, rotation) from a file name, by rule 2."""
    stem = re.sub(r"\.(?:gz|zst)$", "", name, flags=re.IGNORECASE)
    rotation = 0
    if _ROTATION.search(stem) and _EXT.search(_ROTATION.sub("", stem)):
        rotation = int(_ROTATION.search(stem).group(1))  # type: ignore[union-attr]
        stem = _ROTATION.sub("", stem)
    stem = _DATE.sub("", _EXT.sub("", stem))
    ranks: list[tuple[str, int]] = []
    while found := _RANK_SUFFIX.search(stem):
        ranks.insert(0, (found.group(1).upper(), int(found.group(2))))
        stem = stem[: found.start()]
    return stem, tuple(ranks), rotation


def read_node_map(path: Path) -> list[tuple[str, str]]:
    """Rows (node, file_glob) of a mapping CSV, in file order."""
    try:
        with path.open(newline="", encoding="utf-8") as handle:
            rows = list(csv.DictReader(handle))
    except OSError as exc:
        raise InputError(f"cannot read the node map: {exc.strerror}", path=str(path)) from exc
    if not rows or not {"node", "file_glob"} <= set(rows[0]):
        raise InputError(
            "the node map needs a header `node,file_glob` and at least one row",
            path=str(path),
            fix="write one row per node: prefill-0,prefill0*.log",
        )
    return [(r["node"].strip(), r["file_glob"].strip()) for r in rows if r["node"]]


def node_of(rel: str, node_map: list[tuple[str, str]]) -> tuple[str, Ranks, int]:
    """Node, ranks and rotation of a file given by its relative path."""
    pure = PurePosixPath(rel)
    stem, ranks, rotation = parse_name(pure.name)
    for node, glob in node_map:
        if fnmatchcase(rel, glob) or fnmatchcase(pure.name, glob):
            return node, ranks, rotation
    if stem.lower() in GENERIC and pure.parent.name:
        return pure.parent.name, ranks, rotation
    return stem or pure.name, ranks, rotation


def classify(paths: list[tuple[Path, str, str]], node_map: list[tuple[str, str]]) -> list[LogFile]:
    """LogFiles for (path, name for naming, name shown in provenance) triples, in reading order:
    by node, ranks, oldest rotation first, then name."""
    files = []
    for path, naming, shown in paths:
        node, ranks, rotation = node_of(naming, node_map)
        files.append(LogFile(node, ranks, -rotation, shown, path))
    return sorted(files)
