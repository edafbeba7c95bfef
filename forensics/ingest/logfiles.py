"""A case's engine logs (its logs/ folder): which files are read, which are skipped (hidden
files, links that lead outside the case), and their load through forensics.logs with the
per-file counts ingest reports and the manifest records."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pyarrow as pa

from forensics.base.arrow import table_of
from forensics.base.hashing import sha256_file
from forensics.case.discover import HIDDEN, OUTSIDE, outside_case
from forensics.case.result import FileCounts
from forensics.casedb.sql import registered, run_script, sql
from forensics.logs.discover import is_log_file
from forensics.logs.load import load_logs

_CUT = pa.schema([("file", pa.string()), ("line", pa.int64()), ("kinds", pa.string())])


def log_files(case_dir: Path, follow_links: bool = False) -> list[str]:
    """The engine logs of a case (relative paths), read by the log adapters. A link that leads
    outside the case folder is not read unless follow_links is true."""
    folder = case_dir / "logs"
    if not folder.is_dir() or (
        folder.is_symlink() and not follow_links and outside_case(folder, case_dir.resolve())
    ):
        return []
    root = case_dir.resolve()
    return sorted(
        p.relative_to(case_dir).as_posix()
        for p in folder.rglob("*")
        if is_log_file(p) and (follow_links or not outside_case(p, root))
    )


def logs_skipped(case_dir: Path, read: list[str]) -> list[tuple[str, str]]:
    """Files in logs/ that are not read: hidden files and links outside the case."""
    folder = case_dir / "logs"
    if not folder.is_dir():
        return []
    if folder.is_symlink() and not read and outside_case(folder, case_dir.resolve()):
        return [("logs", OUTSIDE)]
    out = []
    for p in folder.rglob("*"):
        rel = p.relative_to(case_dir).as_posix()
        if rel in read or not (p.is_file() or p.is_symlink()):
            continue
        if p.is_symlink() and outside_case(p, case_dir.resolve()):
            out.append((rel, OUTSIDE))
        elif p.name.startswith("."):
            out.append((rel, HIDDEN))
    return out


def load_log_files(
    con: duckdb.DuckDBPyConnection, case_dir: Path, hashes: dict[str, str]
) -> dict[str, FileCounts]:
    """Engine logs in the case's logs/ folder: node facts and per-request evidence. A line is
    loaded when it was read whole (parsed or ignored as unrelated), quarantined when cut."""
    files = [rel for rel in hashes if rel.startswith("logs/")]
    if not files:
        return {}
    summary = load_logs(con, case_dir, [case_dir.resolve() / rel for rel in files])
    cut = [{"file": f.file, "line": n, "kinds": k} for f in summary.files for n, k in f.cut]
    with registered(con, {"_log_cut": table_of(cut, _CUT)}):
        run_script(con, sql("ingest/log_cut_lines"))
    out = {}
    for f in summary.files:
        path = Path(f.file) if Path(f.file).is_absolute() else case_dir / f.file
        digest = hashes.get(f.file) or sha256_file(path)
        out[f.file] = FileCounts(
            f.file, "logs", digest, path.stat().st_size, f.lines, f.parsed + f.ignored, f.truncated
        )
    return out
