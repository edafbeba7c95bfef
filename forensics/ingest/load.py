"""Ingest a case folder into the case database, all or nothing.

Every run replaces the case's inputs with the folder's current content inside one transaction,
so re-ingesting the same files never duplicates rows and an interrupted run leaves the case as it
was. When every file's checksum matches the last ingest, nothing is reloaded."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import duckdb

from forensics import __version__
from forensics.base.gcpause import collector_paused
from forensics.base.hashing import Hashed, changed_since, hash_file
from forensics.base.progress import ProgressFn, no_progress
from forensics.case import columns
from forensics.case.contract import OPS, TABLES, TableContract
from forensics.case.discover import Discovery, InputFile, discover
from forensics.case.result import FileCounts, IngestResult, files_table
from forensics.casedb.sql import (
    QueryLog,
    first_row,
    ident,
    nested,
    one_row,
    recording,
    registered,
    run,
    run_script,
    sql,
    tables,
    template,
)
from forensics.db import BOOKKEEPING_TABLES, INPUT_TABLES, connect, derived_tables
from forensics.errors import InputError, interrupted
from forensics.ingest.batched import batches, load_batch
from forensics.ingest.chunks import jsonl_parts
from forensics.ingest.codeid import ingest_code_digest
from forensics.ingest.logfiles import load_log_files, log_files, logs_skipped
from forensics.ingest.readers import stage_file
from forensics.ingest.tapfiles import load_tap, tap_files, unfinished_parts
from forensics.ledger.store import (
    ExternalLedger,
    detach,
    ledger_loaded,
    ledger_meta,
    ledger_table,
    validate_ledger,
    without_ledger,
)
from forensics.logs.load import NODE_MAP_NAME


def ingest_case(
    case_dir: Path,
    db_path: Path,
    *,
    assume_utc: bool = False,
    follow_links: bool = False,
    progress: ProgressFn = no_progress,
    ledger: ExternalLedger | None = None,
) -> IngestResult:
    """Open (or create) the case database at db_path and ingest case_dir into it. A database
    this ingest created is removed again when the ingest fails: left with its tables and no
    rows, it read as a case in which nothing happened (an existing case stays as it was)."""
    discovery = discover(case_dir, follow_links)
    created = not db_path.exists()
    with recording():
        con = connect(db_path)
        done = False
        try:
            result = ingest_into(
                con,
                case_dir,
                discovery,
                assume_utc=assume_utc,
                follow_links=follow_links,
                progress=progress,
                ledger=ledger,
            )
            done = True
            return result
        finally:
            con.close()
            if created and not done:
                for path in (db_path, db_path.with_name(db_path.name + ".wal")):
                    path.unlink(missing_ok=True)


@collector_paused()  # Python's cyclic garbage collector off meanwhile (forensics.base.gcpause)
def ingest_into(
    con: duckdb.DuckDBPyConnection,
    case_dir: Path,
    discovery: Discovery,
    *,
    assume_utc: bool = False,
    follow_links: bool = False,
    progress: ProgressFn = no_progress,
    ledger: ExternalLedger | None = None,
) -> IngestResult:
    if ledger is not None:  # the ledger is checked in place, never loaded or skipped as unchanged
        discovery = without_ledger(discovery)
    logs = log_files(case_dir, follow_links)
    discovery.skipped[:] = sorted(set(discovery.skipped) | set(logs_skipped(case_dir, logs)))
    hashed = {f.rel: hash_file(f.path) for f in discovery.files}
    hashed.update({rel: hash_file(case_dir / rel) for rel in logs})
    hashed.update({rel: hash_file(case_dir / rel) for rel in tap_files(case_dir, follow_links)})
    hashes = {rel: h.sha256 for rel, h in hashed.items()}
    params = {"assume_utc": assume_utc, "follow_links": follow_links}
    with recording() as queries:
        stored = (
            None if ledger else _stored_result(con, case_dir, discovery, hashes, params, queries)
        )
        if stored is not None:
            return stored
        detach(con)
        run_script(con, sql("ingest/settings"))
        con.begin()
        try:
            ledger_table(con)  # where an earlier external ingest left its view
            result = _load(con, case_dir, discovery, hashes, params, progress, ledger)
            unchanged_since_hashed(case_dir, hashed)
            _record(con, result, params, queries)
            con.commit()
        except BaseException:
            con.rollback()
            raise
        finally:
            run_script(con, sql("ingest/settings_reset"))
    return result


def unchanged_since_hashed(case_dir: Path, hashed: dict[str, Hashed]) -> None:
    """Every file parsed is still the file hashed (read again after the parse, its bytes and
    stamp compared): a file changed while ingest read it stops the ingest, naming it, instead
    of a manifest recording a checksum of bytes that were not the ones analysed."""
    for rel, before in sorted(hashed.items()):
        why = changed_since(case_dir / rel, before)
        if why is not None:
            raise InputError(
                f"this file changed while it was ingested: {why}; nothing was loaded from the case",
                path=rel,
                fix="stop whatever writes to the case folder (work on a read-only copy of the "
                "evidence), then ingest again",
            )


def _load(
    con: duckdb.DuckDBPyConnection,
    case_dir: Path,
    discovery: Discovery,
    hashes: dict[str, str],
    params: dict[str, bool],
    progress: ProgressFn,
    ledger: ExternalLedger | None = None,
) -> IngestResult:
    _clear(con)
    columns.start(con)
    with tempfile.TemporaryDirectory(prefix="kvforensics-") as tmp:
        counts = _load_tables(con, discovery, hashes, params, progress, Path(tmp))
    if ledger is not None:
        links: list[tuple[str, str]] = []
        checked = validate_ledger(
            con,
            case_dir,
            ledger.location,
            params["assume_utc"],
            ledger.ray,
            progress,
            (params["follow_links"], links),
        )
        counts.update({c.path: c for c in checked})
        discovery.skipped[:] = sorted(set(discovery.skipped) | set(links))
    if ledger is None:  # an external ledger's checks already warned of unknown requests
        run_script(con, sql("ingest/unknown_requests"))
        # a ledger names nodes of its own, a mapping file is the operator's word
        if not ledger_loaded(con) and not (case_dir / "logs" / NODE_MAP_NAME).is_file():
            run_script(con, sql("ingest/pair_log_node"))
    run_script(con, sql("ingest/request_times"))
    columns.warn_ignored(con)
    result = IngestResult(
        str(case_dir),
        [counts[rel] for rel in sorted(counts)],
        discovery.skipped,
        _warning_count(con),
        unchanged=False,
        notes=input_notes(con),
        ledger_external=ledger is not None,
    )
    progress("done", len(discovery.files), len(discovery.files))
    return result


def _load_tables(
    con: duckdb.DuckDBPyConnection,
    discovery: Discovery,
    hashes: dict[str, str],
    params: dict[str, bool],
    progress: ProgressFn,
    workdir: Path,
) -> dict[str, FileCounts]:
    counts: dict[str, FileCounts] = {}
    rank = {f.rel: i for i, f in enumerate(discovery.files)}
    done = 0
    for table in TABLES:
        files = [f for f in discovery.files if f.table == table.name]
        for batch in batches(files, table, rank):  # small ledger parts several at once
            progress(batch.files[0].rel, done, len(discovery.files))
            if batch.projection is None:
                (f,) = batch.files
                identity = (hashes[f.rel], rank[f.rel])
                counts[f.rel] = _load_file(con, f, table, identity, params, workdir)
            else:
                loaded = load_batch(
                    con, batch, table, lambda f: (hashes[f.rel], rank[f.rel]), params
                )
                counts.update((c.path, c) for c in loaded)
            done += len(batch.files)
        if table.key and files:
            _dedupe(con, table, counts)
        if table.name == "nodes":
            counts.update(load_log_files(con, discovery.case_dir, hashes))
        if table.name == "kv_events" and files:
            run_script(con, sql("ingest/partial_seq"))
    case_dir = discovery.case_dir
    counts.update(load_tap(con, case_dir, hashes, unfinished_parts(discovery.skipped)))
    return counts


def _clear(con: duckdb.DuckDBPyConnection) -> None:
    for name in derived_tables(con):
        run(con, "ingest/drop_table", table=ident(name))
    for name in (*INPUT_TABLES, *BOOKKEEPING_TABLES, "case_meta"):
        run(con, "ingest/empty_table", table=ident(name))


def _load_file(
    con: duckdb.DuckDBPyConnection,
    f: InputFile,
    table: TableContract,
    identity: tuple[str, int],
    params: dict[str, bool],
    workdir: Path,
) -> FileCounts:
    """Stage, validate and load one file (a large JSON Lines file part by part); identity is
    (sha256, rank in input order)."""
    digest, rank = identity
    totals = [0, 0, 0]
    parts = jsonl_parts(f, workdir) if f.fmt == "jsonl" else iter([(f, 0)])
    for part, lines_before in parts:
        try:
            counts = _load_part(con, part, table, rank, params, workdir, lines_before)
        except duckdb.Error as exc:
            if f.fmt != "parquet" or interrupted(exc):
                raise
            # Parquet pages are read as the rows are checked: damage shows only then
            raise InputError(
                f"cannot read this Parquet file: {exc}",
                path=f.rel,
                fix="check that the file is complete Parquet",
            ) from exc
        totals = [a + b for a, b in zip(totals, counts, strict=True)]
        if part.path != f.path:
            part.path.unlink()
    return FileCounts(f.rel, table.name, digest, f.path.stat().st_size, *totals)


def _load_part(
    con: duckdb.DuckDBPyConnection,
    f: InputFile,
    table: TableContract,
    rank: int,
    params: dict[str, bool],
    workdir: Path,
    lines_before: int,
) -> tuple[int, int, int]:
    scan = stage_file(con, f, table, workdir)
    if lines_before:
        run_script(con, sql("ingest/stage_shift_rows"), {"lines_before": lines_before})
    row = first_row(con, sql("ingest/counts"))
    read = int(row[0]) if row else 0
    if scan is not None and f.fmt == "csv" and read != scan.records:
        raise InputError(
            f"the file holds {scan.records:,} records on {scan.lines:,} non-blank data lines, but "
            f"{read:,} were read; nothing was loaded from the case",
            path=f.rel,
            fix="check the file's quotes and line endings (one kind of line ending per file)",
        )
    bound = {**params, "file_rank": rank, "ops": list(OPS), "file": f.rel}
    checks = nested(f"ingest/validate_{table.name}")
    insert = template(sql("ingest/insert"), table=ident(table.name), checks=checks)
    inserted = first_row(con, insert, bound)
    loaded = int(inserted[0]) if inserted else 0
    if loaded < read:  # only a file with bad rows is checked a second time, for them
        bound["table_name"] = table.name
        run(con, "ingest/quarantine_rows", bound, checks=checks)
    return read, loaded, read - loaded


def _dedupe(
    con: duckdb.DuckDBPyConnection, table: TableContract, counts: dict[str, FileCounts]
) -> None:
    assert table.key is not None
    params = {"table_name": table.name, "key_name": table.key}
    run(con, "ingest/dedupe", params, table=ident(table.name), key=ident(table.key))
    for rel, n in con.execute(sql("ingest/dup_counts")).fetchall():
        counts[rel].rows_loaded -= n
        counts[rel].rows_quarantined += n


def _warning_count(con: duckdb.DuckDBPyConnection) -> int:
    row = one_row(con.execute(sql("ingest/warning_count")))
    return int(row[0]) if row else 0


def _record(
    con: duckdb.DuckDBPyConnection,
    result: IngestResult,
    params: dict[str, bool],
    queries: QueryLog,
) -> None:
    """The files read and the queries used, so that an unchanged case is not loaded again."""
    with registered(con, {"_files": files_table(result.files)}):
        run_script(con, sql("ingest/record_files"))
    meta = {
        "ingest_queries": json.dumps(queries.used(), sort_keys=True),
        "case_dir": result.case_dir,
        "ingest_params": json.dumps(params, sort_keys=True),
        "tool_version": __version__,
        "ingest_code": ingest_code_digest(),
        "skipped": json.dumps(result.skipped),
    }
    for key, value in meta.items():
        run_script(con, sql("ingest/case_meta_set"), {"key": key, "value": value})


def _stored_result(
    con: duckdb.DuckDBPyConnection,
    case_dir: Path,
    discovery: Discovery,
    hashes: dict[str, str],
    params: dict[str, bool],
    queries: QueryLog,
) -> IngestResult | None:
    """The last ingest's result when this same code (ingest_code_digest) read exactly these
    files with these parameters and loaded the ledger too (its queries then count as used by
    this run); None otherwise, also when the last ingest kept the ledger outside the case: this
    one loads it."""
    rows = con.execute(sql("ingest/stored_files")).fetchall()
    stored = [FileCounts(*r) for r in rows]
    meta = dict(con.execute(sql("ingest/case_meta_all")).fetchall())
    same = (
        {f.path: f.sha256 for f in stored} == hashes
        and meta.get("ingest_params") == json.dumps(params, sort_keys=True)
        and bool(stored)
        and ledger_meta(con) is None
        and meta.get("ingest_code") == ingest_code_digest()  # loaded by this very code
    )
    if not same:
        return None
    stored.sort(key=lambda f: f.path)
    queries.vouch(json.loads(meta.get("ingest_queries") or "{}"))
    return IngestResult(
        str(case_dir),
        stored,
        discovery.skipped,
        _warning_count(con),
        unchanged=True,
        notes=input_notes(con),
    )


def input_notes(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Warnings that change what the analysis sees: a node with seq on some rows only (its
    events ordered by ts), columns not in the contract (not loaded), what the tap's reports say
    it could not record."""
    order = [r[0] for r in con.execute(sql("ingest/order_notes")).fetchall()]
    order += [r[0] for r in con.execute(sql("ingest/log_node_notes")).fetchall()]
    tap = (
        [r[0] for r in con.execute(sql("ingest/tap_notes")).fetchall()]
        if "tap_reports" in tables(con)
        else []  # a case database from before the tap's reports were read
    )
    return order + columns.notes(con) + tap
