"""Open a DuckDB connection with the project's settings, macros and schema.

The layer below `forensics.db`: it knows nothing of a ledger kept outside the database, so the
ledger's own checks (forensics.ledger) can open their in-memory connections with it, and
`forensics.db.connect` adds the ledger view on top."""

from __future__ import annotations

import glob
import os
import re
import secrets
import shutil
import tempfile
from pathlib import Path

import duckdb

from forensics.casedb.interrupts import register
from forensics.casedb.schema_docs import apply_comments
from forensics.casedb.spillnames import SPILL_PREFIX, spill_pid
from forensics.casedb.sql import literal, run_at_once, sql, statements, template
from forensics.errors import CaseError, UsageError

# DuckDB's own default is 80 % of the machine's memory; the compiled sweep's arrays live beside
# it, so the case database gets a fixed budget (override with KVFORENSICS_MEMORY_LIMIT or the
# bench's --memory-limit). Work beyond it spills to disk.
DEFAULT_MEMORY_LIMIT = "4GB"

# A new case database is written in the storage format of this DuckDB release, so that a
# responder's DuckDB CLI or Python package of that release or any later one opens it. (DuckDB
# otherwise writes its newest format, which older releases refuse to read.)
STORAGE_COMPATIBILITY = "v1.1.0"

# KVFORENSICS_STORAGE_VERSION chooses a newer format for a new case database: with v1.3.0 or
# latest, writing the ledger costs about a fifth less CPU (text is compressed with DuckDB 1.3's
# dictionary-and-FSST scheme; v1.2.0 saves little), and only DuckDB of that release or later
# opens the file. An existing database keeps the format it was created with.
STORAGE_VERSIONS = ("v1.1.0", "v1.2.0", "v1.3.0", "latest")

# The oldest DuckDB the project runs on (pyproject.toml asks for the same). Older releases fail
# on its SQL (a parameter as a COPY target, relations' to_arrow_reader) or change its answers
# (timestamps out of range, time-zone-aware values fetched through pytz), so they are refused
# before a case database is opened rather than left to fail half way.
MIN_DUCKDB = (2, 0, 1)


def open_database(
    path: Path | str,
    *,
    read_only: bool = False,
    memory_limit: str | None = None,
    schema: bool = True,
    spill_beside: Path | None = None,
) -> duckdb.DuckDBPyConnection:
    """Connect, set UTC and the project's macros, and create the input schema if missing
    (schema=False: settings and macros only, for a scratch connection that checks files).
    spill_beside: for an in-memory connection, the case database it works for on this machine
    (it then spills beside it; see scratch_spill_folder)."""
    check_duckdb_version(duckdb.__version__)
    config: dict[str, str | bool | int | float | list[str]] = (
        {} if read_only else {"storage_compatibility_version": storage_version()}
    )
    scratch = str(path) == ":memory:"
    if scratch:
        config["temp_directory"] = scratch_spill_folder(spill_beside)
    try:
        if isinstance(path, Path):
            path.parent.mkdir(parents=True, exist_ok=True)
        con = duckdb.connect(str(path), read_only=read_only, config=config)
    except (OSError, duckdb.IOException, duckdb.InvalidInputException) as exc:
        fix = (
            "give a complete case database written by `kvforensics ingest`"
            if read_only
            else "give a file path where it can be written, and no other process holding it"
        )
        raise CaseError(f"{path}: cannot open the case database ({exc}); {fix}") from exc
    register(con)  # Ctrl-C stops its statements, whichever thread runs them
    if not read_only and not scratch:
        remove_stale_spills(Path(path))  # this run holds the database: none is a writer's
    prepare_connection(con, memory_limit, schema=schema and not read_only)
    # The comments explain a case database to its readers; a scratch one (a partition task's,
    # a check's) goes without them.
    if schema and not read_only and not scratch:
        apply_comments(con)
    return con


def prepare_connection(
    con: duckdb.DuckDBPyConnection, memory_limit: str | None = None, schema: bool = True
) -> None:
    """The settings and macros of a connection (its own: DuckDB keeps them per connection), and
    the input schema where missing in its database when `schema`."""
    memory_limit = (
        memory_limit or os.environ.get("KVFORENSICS_MEMORY_LIMIT") or (DEFAULT_MEMORY_LIMIT)
    )
    settings = template(sql("schema/settings"), memory_limit=literal(_size(memory_limit)))
    run_at_once(con, settings, sql("schema/macros"))
    if schema:
        create_case_schema(con)
        run_at_once(con, sql("schema/logs"))


def create_case_schema(con: duckdb.DuckDBPyConnection) -> None:
    """The input tables (queries/schema/case.sql) where missing; kv_events not where the view of
    a ledger kept outside the case stands in its place (forensics.ledger.store.keep_outside):
    DuckDB before 2.0 refuses to create a table of a view's name even if not there."""
    outside = ledger_outside(con)
    kept = [
        s for s in statements(sql("schema/case")) if not (outside and _KV_EVENTS_TABLE.match(s))
    ]
    run_at_once(con, ";\n".join(kept))


def ledger_outside(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether the case database's own kv_events is the view of a ledger kept outside it."""
    return bool(con.execute(sql("schema/ledger_view")).fetchall())


def thread_share(workers: int) -> int:
    """DuckDB threads for each of `workers` connections working at once on this machine."""
    return max(1, (os.cpu_count() or 1) // max(1, workers))


_KV_EVENTS_TABLE = re.compile(r"(?:--[^\n]*\n|\s)*CREATE TABLE IF NOT EXISTS kv_events\b")


def scratch_spill_folder(beside: Path | None = None) -> str:
    """Where an in-memory connection spills: a folder of its own beside the case database it
    works for, on disk like the database's own spill (`case.duckdb.tmp`), or, where it has none
    on this machine (a Ray task), in the system's temporary folder (TMPDIR). DuckDB makes the
    folder on the first spill and removes it when the connection closes. DuckDB's own choice is
    .tmp in the working directory, which may be read-only, the case folder's evidence, or shared
    by two runs."""
    name = f"{SPILL_PREFIX}{os.getpid()}-{secrets.token_hex(4)}"
    if beside is not None:
        return str(beside.parent / f"{beside.name}.{name}")
    return str(Path(tempfile.gettempdir()) / name)


def remove_stale_spills(db: Path) -> list[Path]:
    """Remove the spill folders beside the case database `db` (scratch_spill_folder) that a
    killed run left: those whose process is no longer running on this machine. Called once the
    database is open for writing, so no other run of it is writing there. A folder of a live
    process, a link or anything else of that name is left alone; a folder that cannot be
    removed stays for the next run. Returns the folders removed."""
    removed: list[Path] = []
    try:
        found = list(db.parent.glob(f"{glob.escape(db.name)}.{SPILL_PREFIX}*"))
    except OSError:
        return removed
    for folder in found:
        pid = spill_pid(db.name, folder.name)
        if pid is None or folder.is_symlink() or not folder.is_dir() or process_running(pid):
            continue
        shutil.rmtree(folder, ignore_errors=True)
        if not folder.exists():
            removed.append(folder)
    return removed


def process_running(pid: int) -> bool:
    """Whether a process with this id runs on this machine (one of another user counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (OverflowError, OSError):  # another user's process (EPERM), or no such id at all
        return True
    return True


def database_file(con: duckdb.DuckDBPyConnection) -> Path | None:
    """The file of the connection's database; None for an in-memory one."""
    rows = con.execute(sql("schema/database_file")).fetchall()
    return Path(rows[0][0]) if rows and rows[0][0] else None


def check_duckdb_version(found: str) -> None:
    """Refuse a DuckDB older than MIN_DUCKDB (a UsageError naming the fix)."""
    parts = re.findall(r"\d+", found)[:3]
    if tuple(int(p) for p in parts) >= MIN_DUCKDB:
        return
    need = ".".join(map(str, MIN_DUCKDB))
    raise UsageError(
        f"DuckDB {found} is installed; kvforensics needs DuckDB {need} or later (older releases "
        f"reject its SQL or read timestamps differently); fix: pip install -U 'duckdb>={need}' "
        "in the environment that runs kvforensics"
    )


def storage_version() -> str:
    """The storage format of a new case database: STORAGE_COMPATIBILITY unless
    KVFORENSICS_STORAGE_VERSION names another of STORAGE_VERSIONS."""
    chosen = os.environ.get("KVFORENSICS_STORAGE_VERSION", "").strip() or STORAGE_COMPATIBILITY
    if chosen not in STORAGE_VERSIONS:
        raise UsageError(
            f"KVFORENSICS_STORAGE_VERSION={chosen!r} is not a storage format kvforensics writes; "
            f"give one of {', '.join(STORAGE_VERSIONS)} (or leave it unset for "
            f"{STORAGE_COMPATIBILITY}, which DuckDB 1.1 and later open)"
        )
    return chosen


_UNITS = {"": 1, "B": 1, "BYTES": 1, "KB": 1000, "MB": 1000**2, "GB": 1000**3, "TB": 1000**4}
_UNITS |= {"KIB": 1 << 10, "MIB": 1 << 20, "GIB": 1 << 30, "TIB": 1 << 40}


def size_bytes(text: str) -> int:
    """Bytes of a DuckDB size such as '3.7 GiB', '512MB' or '1048576KiB'."""
    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)\s*", text)
    if m is None or m.group(2).upper() not in _UNITS:
        raise ValueError(f"not a size: {text!r}")
    return int(float(m.group(1)) * _UNITS[m.group(2).upper()])


def memory_limit_bytes(con: duckdb.DuckDBPyConnection) -> int:
    """The connection's memory limit in bytes: as it was opened with (schema/settings), or as
    precise as DuckDB reports its setting."""
    rows = con.execute(sql("schema/memory_limit")).fetchall()
    return size_bytes(str(rows[0][0])) if rows and rows[0][0] else 0


def _size(text: str) -> str:
    """Accept only sizes like '4GB' or '512MiB' (SET takes no parameter)."""
    if not re.fullmatch(r"[0-9]+(\.[0-9]+)?\s*[KMGT]i?B", text.strip(), re.IGNORECASE):
        raise UsageError(f"memory limit '{text}' is not a size such as 4GB or 512MB")
    return text.strip()
