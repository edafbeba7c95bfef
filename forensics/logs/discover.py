"""Finding the log files under the paths a user gives."""

from __future__ import annotations

from pathlib import Path

from forensics.errors import UsageError

# Files in a logs folder that are not engine logs: tables and the node map.
SKIP_SUFFIXES = (".csv", ".parquet", ".json", ".jsonl", ".md")


def is_log_file(path: Path) -> bool:
    name = path.name.lower()
    return path.is_file() and not name.startswith(".") and not name.endswith(SKIP_SUFFIXES)


def discover(paths: list[Path]) -> list[tuple[Path, str, str]]:
    """(path, name for naming, name shown) for every log file: a file as given (named with its
    folder), a folder's files (recursively; hidden files and tables skipped) relative to it."""
    found: list[tuple[Path, str, str]] = []
    for given in paths:
        if given.is_file():
            found.append((given, given.as_posix(), given.as_posix()))
        elif given.is_dir():
            for p in sorted(given.rglob("*")):
                if is_log_file(p):
                    rel = p.relative_to(given).as_posix()
                    found.append((p, rel, (given / rel).as_posix()))
        else:
            raise UsageError(f"{given}: no such file or folder; give log files or folders")
    if not found:
        raise UsageError("no log files found in " + ", ".join(str(p) for p in paths))
    return _once(found)


def _once(found: list[tuple[Path, str, str]]) -> list[tuple[Path, str, str]]:
    """Each file once, even when named both alone and through its folder."""
    seen: set[Path] = set()
    unique = []
    for entry in found:
        key = entry[0].resolve()
        if key not in seen:
            seen.add(key)
            unique.append(entry)
    return unique
