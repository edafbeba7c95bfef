"""Find the input files of a case folder and tell which table and format each one is."""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass
from pathlib import Path

from forensics.case.contract import BY_NAME
from forensics.errors import UsageError

FORMATS = {
    ".csv": "csv",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "jsonl",
    ".parquet": "parquet",
    ".pq": "parquet",
}
COMPRESSIONS = {".gz": "gzip", ".gzip": "gzip", ".zst": "zstd", ".zstd": "zstd"}
# Folders inside a case that are not tables: logs are read by the log adapters, tap/ holds the
# tap's reports of what it could not record (forensics.ingest.tapfiles).
NOT_TABLES = {"logs", "ground_truth", "tap"}
UNFINISHED = (
    "an unfinished ledger part (a tap was stopped while writing it); not read: its events are "
    "a hole in the node's ledger, judged as such"
)


@dataclass(frozen=True)
class InputFile:
    path: Path  # absolute
    rel: str  # relative to the case folder, POSIX separators
    table: str
    fmt: str  # csv | jsonl | parquet
    compression: str | None


@dataclass
class Discovery:
    case_dir: Path
    files: list[InputFile]
    skipped: list[tuple[str, str]]  # (relative path, why)


def split_format(name: str) -> tuple[str, str | None, str | None]:
    """'kv_events.jsonl.gz' -> ('kv_events', 'jsonl', 'gzip'); fmt is None when unknown."""
    suffixes = [s.lower() for s in Path(name).suffixes]
    compression = COMPRESSIONS.get(suffixes[-1]) if suffixes else None
    if compression:
        suffixes = suffixes[:-1]
    fmt = FORMATS.get(suffixes[-1]) if suffixes else None
    stem = name.split(".")[0]
    return stem, fmt, compression


def _did_you_mean(name: str) -> str:
    match = difflib.get_close_matches(name, list(BY_NAME), n=1, cutoff=0.6)
    return f"; did you mean '{match[0]}'?" if match else ""


def _classify(path: Path, case_dir: Path, table: str | None) -> InputFile | tuple[str, str]:
    rel = path.relative_to(case_dir).as_posix()
    stem, fmt, compression = split_format(path.name)
    table = table or stem
    if fmt is None:
        if path.name.endswith(".parquet.tmp"):
            return rel, UNFINISHED
        return rel, "not a data file (expected .csv, .jsonl or .parquet, optionally .gz/.zst)"
    if table not in BY_NAME:
        return rel, f"'{table}' is not a table of the input contract{_did_you_mean(table)}"
    return InputFile(path, rel, table, fmt, compression)


def discover(case_dir: Path, follow_links: bool = False) -> Discovery:
    """Top-level files are named after their table; a folder named after a table holds parts.

    Hidden files (a name starting with '.', such as '._part.csv' copies) are skipped and listed.
    A symbolic link that leads outside the case folder is skipped and listed unless
    follow_links is true; its target is never named or read."""
    if case_dir.is_file():
        raise UsageError(f"{case_dir} is a file; give the case folder that holds it")
    if not case_dir.is_dir():
        raise UsageError(f"case folder not found: {case_dir}")
    root = case_dir.resolve()
    found: list[InputFile] = []
    skipped: list[tuple[str, str]] = []
    for entry in sorted(case_dir.iterdir()):
        if entry.name in NOT_TABLES:
            continue
        for path, table in _candidates(entry, root, follow_links, skipped):
            rel = path.relative_to(case_dir).as_posix()
            if any(part.startswith(".") for part in Path(rel).parts):
                skipped.append((rel, HIDDEN))
                continue
            item = _classify(path, case_dir, table)
            (found if isinstance(item, InputFile) else skipped).append(item)  # type: ignore[arg-type]
    found.sort(key=lambda f: f.rel)
    skipped.sort()
    return Discovery(case_dir, found, skipped)


HIDDEN = "hidden file (its name starts with '.'); not read"
SPECIAL = "not a regular file (a pipe, socket, device or broken link); not read"
INSIDE = "symbolic link to a folder; not followed (give --follow-links to read it)"
OUTSIDE = (
    "symbolic link to a place outside the case folder; not followed (give --follow-links "
    "to read it)"
)


def outside_case(path: Path, root: Path) -> bool:
    """True when path (or a link on the way to it) resolves outside the case folder root."""
    try:
        path.resolve().relative_to(root)
    except ValueError:
        return True
    return False


def _candidates(
    entry: Path, root: Path, follow_links: bool, skipped: list[tuple[str, str]]
) -> list[tuple[Path, str | None]]:
    """The files under a top-level entry, with the table a folder names (None for a file)."""
    case_dir = entry.parent
    if entry.is_symlink() and not follow_links and outside_case(entry, root):
        skipped.append((entry.relative_to(case_dir).as_posix(), OUTSIDE))
        return []
    if not entry.is_dir():
        if not entry.is_file():
            skipped.append((entry.relative_to(case_dir).as_posix(), SPECIAL))
            return []
        return [(entry, None)]
    out: list[tuple[Path, str | None]] = []
    for folder, dirs, files in os.walk(entry, followlinks=follow_links):
        base = Path(folder)
        for name in sorted(dirs):
            link = base / name
            if link.is_symlink() and not follow_links:
                inside = not outside_case(link, root)
                skipped.append(
                    (link.relative_to(case_dir).as_posix(), INSIDE if inside else OUTSIDE)
                )
        for name in files:
            path = base / name
            if path.is_symlink() and not follow_links and outside_case(path, root):
                skipped.append((path.relative_to(case_dir).as_posix(), OUTSIDE))
            elif path.is_file():
                out.append((path, entry.name))
            else:
                skipped.append((path.relative_to(case_dir).as_posix(), SPECIAL))
    return sorted(out)
