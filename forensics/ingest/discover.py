"""Find the input files of a case folder and tell which table and format each one is."""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path

from forensics.errors import UsageError
from forensics.ingest.contract import BY_NAME

FORMATS = {
    ".csv": "csv",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "jsonl",
    ".parquet": "parquet",
    ".pq": "parquet",
}
COMPRESSIONS = {".gz": "gzip", ".gzip": "gzip", ".zst": "zstd", ".zstd": "zstd"}
# Folders inside a case that are not tables: logs are read by the log adapters.
NOT_TABLES = {"logs", "ground_truth"}


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
        return rel, "not a data file (expected .csv, .jsonl or .parquet, optionally .gz/.zst)"
    if table not in BY_NAME:
        return rel, f"'{table}' is not a table of the input contract{_did_you_mean(table)}"
    return InputFile(path, rel, table, fmt, compression)


def discover(case_dir: Path) -> Discovery:
    """Top-level files are named after their table; a folder named after a table holds parts."""
    if not case_dir.is_dir():
        raise UsageError(f"case folder not found: {case_dir}")
    found: list[InputFile] = []
    skipped: list[tuple[str, str]] = []
    for entry in sorted(case_dir.iterdir()):
        if entry.name.startswith(".") or entry.name in NOT_TABLES:
            continue
        candidates = (
            [(entry, None)]
            if entry.is_file()
            else [(p, entry.name) for p in sorted(entry.rglob("*")) if p.is_file()]
        )
        for path, table in candidates:
            item = _classify(path, case_dir, table)
            (found if isinstance(item, InputFile) else skipped).append(item)  # type: ignore[arg-type]
    found.sort(key=lambda f: f.rel)
    return Discovery(case_dir, found, skipped)
