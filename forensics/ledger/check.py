"""The check of an external ledger's partition (`ingest --ledger-external`): one node's parts
validated with the ingest's own checks, nothing loaded.

The parts are read in batches: consecutive parts of the same schema, up to BATCH_ROWS rows or
BATCH_PARTS parts, in one scan (queries/ingest/stage_parquet_batch.sql). A query of its own per part
cost about 45 ms of planning whatever the part held (the validation has many checks), and an
engine's ledger tap closes a part every minute: two weeks of a node are some 20,000 parts. A
batch is bounded in rows because the check keeps each quarantined row apart, and a part can
have every row quarantined. A batch that cannot be read is read again part by part, so that
the error names the damaged part.
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pyarrow as pa

from forensics.base.arrow import columns_table
from forensics.base.hashing import Hashed
from forensics.case.contract import OPS
from forensics.case.expansion import check_expansion
from forensics.case.result import FileCounts
from forensics.casedb.dbopen import memory_limit_bytes
from forensics.casedb.scratch import ScratchDatabases, scratch_connection
from forensics.casedb.sql import (
    Fragment,
    literal,
    literals,
    nested,
    registered,
    run,
    run_script,
    sql,
    template,
)
from forensics.errors import InputError, disk_full, first_line
from forensics.ledger.external import (
    LedgerFile,
    check_unchanged,
    folder_of,
    local_stamps,
    sha256_of,
)
from forensics.ledger.mirror import mirrored_files
from forensics.ledger.schemas import projection, schemas_of
from forensics.ledger.storage import raise_storage_failure

BATCH_ROWS = 1 << 20  # rows read in one scan, at most (a larger part is read alone)
BATCH_PARTS = 1 << 12  # parts read in one scan, at most

# What a read that fails because of the SQL, not the part, raises: never blamed on a part.
NOT_THE_PART = (
    duckdb.InterruptException,
    duckdb.OutOfMemoryException,
    duckdb.BinderException,
    duckdb.CatalogException,
    duckdb.ParserException,
)


@dataclass
class PartitionCheck:
    counts: list[FileCounts]
    quarantine: pa.Table  # rows for the quarantine table
    warnings: pa.Table  # rows for ingest_warnings (requests not in the request log)
    columns: list[str]  # the columns its parts hold
    schemas: dict[str, dict[str, str]]  # per part (by name): its columns and their types
    facts: pa.Table  # per part: what its kept rows are (queries/ledger/part_facts.sql)


@dataclass
class BatchCheck:
    """What the check of a batch of parts found, each table in part order."""

    counts: list[tuple[str, int, int]]  # per part: its name, rows read, rows quarantined
    quarantine: pa.Table
    warnings: pa.Table
    facts: pa.Table


def check_partition(
    files: list[LedgerFile],
    nodes: pa.Table,
    request_ids: pa.Table,
    assume_utc: bool,
    spill_beside: Path | None = None,
    share: tuple[int, str | None] = (0, None),
    pool: ScratchDatabases | None = None,
) -> PartitionCheck:
    """Validate one partition's parts with the ingest's own checks
    (queries/ingest/validate_kv_events.sql and a check that each row's node is its folder's),
    a batch of parts in one read that keeps only the rows it flags and the facts of the kept
    rows (queries/ledger/check_part.sql). The parts' checksums are computed beside the reads,
    in a thread. spill_beside: the case database, when the check runs on its machine. share:
    the DuckDB threads and memory limit of the check (0 and None: DuckDB's and the default).
    pool: the databases of the threads that run the checks one after another
    (forensics.casedb.scratch); None: the check opens a database of its own (a Ray task)."""
    threads, memory_limit = share
    folder = folder_of(files[0].url)
    stamps = local_stamps(files)  # before any read: checked again after the parse
    # settings and macros only: no input tables; parts at a URL are read from local copies,
    # hashed as they are fetched (forensics.ledger.mirror), so the bytes checked are the bytes
    # hashed and DuckDB reads no remote file
    try:
        with (
            mirrored_files(files, spill_beside) as (files, fetched),
            scratch_connection(pool, memory_limit, spill_beside, schema=False) as con,
        ):
            if threads > 0:
                run(con, "ledger/task_threads", threads=template(str(int(threads))))
            con.register("_nodes", nodes)
            con.register("_request_ids", request_ids)
            run_script(con, sql("ledger/check_inputs"))
            limit = memory_limit_bytes(con)
            for f in files:  # local paths or local copies: a part that expands is refused
                _refuse_expansion(f, limit)
            with ThreadPoolExecutor(max_workers=1) as hasher:
                digests = [
                    known(fetched[f.rel]) if f.rel in fetched else hasher.submit(sha256_of, f.url)
                    for f in files
                ]
                try:
                    schemas = schemas_of(con, files)
                    footer_rows = _footer_rows(con, files)
                    checks = [
                        _check_batch(con, batch, schemas[batch[0].rel], assume_utc)
                        for batch in batches(files, schemas, footer_rows)
                    ]
                    counts = _counts(files, digests, checks, footer_rows)
                    for f, c in zip(files, counts, strict=True):
                        if f.rel in stamps and f.rel not in fetched:
                            check_unchanged(f, Hashed(c.sha256, c.bytes, stamps[f.rel]))
                except BaseException:  # a failed or interrupted check hashes no more parts
                    hasher.shutdown(wait=False, cancel_futures=True)
                    raise
            facts = pa.concat_tables([b.facts for b in checks])
            warnings = [b.warnings for b in checks]
            node_of = {f.rel: f.node for f in files}
            rels, seqs = facts.column("rel").to_pylist(), facts.column("with_seq").to_pylist()
            seq_of = dict(zip(rels, seqs, strict=True))
            for node in sorted(set(node_of.values())):  # each partition's, as a loaded ledger's
                mine = [c for c in counts if node_of[c.path] == node]
                with_seq = sum(seq_of.get(c.path, 0) for c in mine)
                warnings.append(_partial_seq(con, node, mine, with_seq))
    except OSError as exc:  # a part that cannot be fetched or hashed
        raise_storage_failure(exc, folder, "the parts of this folder", os_errors=True)
        raise
    return PartitionCheck(
        counts,
        pa.concat_tables([b.quarantine for b in checks]),
        pa.concat_tables(warnings),
        sorted({c for found in schemas.values() for c in found}),
        schemas,
        facts,
    )


def _counts(
    files: list[LedgerFile],
    digests: list[Future[tuple[str, int]]],
    checks: list[BatchCheck],
    footer_rows: dict[str, int],
) -> list[FileCounts]:
    """Each part's counts and digest; every row is kept or quarantined."""
    counts = []
    for f, digest, (rel, read, bad) in zip(
        files, digests, [c for b in checks for c in b.counts], strict=True
    ):
        assert rel == f.rel, (rel, f.rel)
        if read != footer_rows[f.url]:
            raise RuntimeError(f"{f.rel}: {read:,} rows checked of the {footer_rows[f.url]:,}")
        sha, size = digest.result()
        counts.append(FileCounts(f.rel, "kv_events", sha, size, read, read - bad, bad))
    return counts


def known(digest: tuple[str, int]) -> Future[tuple[str, int]]:
    """A digest already computed, as the hasher's would be."""
    done: Future[tuple[str, int]] = Future()
    done.set_result(digest)
    return done


def batches(
    files: list[LedgerFile], schemas: dict[str, dict[str, str]], rows: dict[str, int]
) -> list[list[LedgerFile]]:
    """The parts in read batches: runs of parts of consecutive ranks with the same columns and
    types, of at most BATCH_ROWS rows (a larger part alone) and BATCH_PARTS parts."""
    out: list[list[LedgerFile]] = []
    held = 0
    for f in files:
        batch = out[-1] if out else None
        if (
            batch is None
            or f.rank != batch[-1].rank + 1
            or schemas[f.rel] != schemas[batch[0].rel]
            or (f.node != batch[0].node and "node" not in schemas[f.rel])
            or held + rows[f.url] > BATCH_ROWS
            or len(batch) >= BATCH_PARTS
        ):
            out.append([f])
            held = rows[f.url]
        else:
            batch.append(f)
            held += rows[f.url]
    return out


def _footer_rows(con: duckdb.DuckDBPyConnection, files: list[LedgerFile]) -> dict[str, int]:
    """The rows each part holds, from its footer (read already: each part was described), by
    URL; a part the read of all names otherwise (a filesystem may spell a URL its own way) is
    read by itself."""
    urls = [f.url for f in files]
    found = dict(con.execute(sql("ledger/part_rows"), {"paths": urls}).fetchall())
    for u in urls:
        if u not in found:
            ((_, found[u]),) = con.execute(sql("ledger/part_rows"), {"paths": [u]}).fetchall()
    return {u: int(found[u]) for u in urls}


def _refuse_expansion(f: LedgerFile, limit: int) -> None:
    """check_expansion of a part; a part whose footer cannot be read is left to the check's
    read, which names it as the loaded ledger's reader does."""
    try:
        check_expansion(f.rel, Path(f.url), limit)
    except (OSError, ValueError):  # pyarrow's ArrowIOError and ArrowInvalid among them
        return


def _check_batch(
    con: duckdb.DuckDBPyConnection,
    batch: list[LedgerFile],
    columns: dict[str, str],
    assume_utc: bool,
) -> BatchCheck:
    """Check a batch of parts in one read; a batch that cannot be read, part by part, so that
    the part that cannot be is named."""
    try:
        return _read_batch(con, batch, columns, assume_utc)
    except NOT_THE_PART:
        raise
    except duckdb.Error as exc:
        if disk_full(exc) is not None:  # this machine's disk (a spill), not the part
            raise
        if len(batch) > 1:
            alone = [_check_batch(con, [f], columns, assume_utc) for f in batch]
            return BatchCheck(
                [c for b in alone for c in b.counts],
                *(pa.concat_tables(getattr(b, t) for b in alone) for t in _TABLES),
            )
        raise InputError(
            # a part read from its local copy (forensics.ledger.mirror) is named as itself
            f"cannot read this Parquet file: {first_line(exc).replace(batch[0].url, batch[0].rel)}",
            path=batch[0].rel,
            fix="check that the file is complete Parquet",
        ) from exc


_TABLES = ("quarantine", "warnings", "facts")  # BatchCheck's tables, in its order
_PARTS = pa.schema([("rank", pa.int64()), ("rel", pa.string())])  # a batch's parts


def _read_batch(
    con: duckdb.DuckDBPyConnection,
    batch: list[LedgerFile],
    columns: dict[str, str],
    assume_utc: bool,
) -> BatchCheck:
    node = batch[0].node
    ranks = [f.rank for f in batch]
    assert ranks == list(range(ranks[0], ranks[0] + len(ranks))), "a batch's ranks run on"
    run(
        con,
        "ingest/stage_parquet_batch",
        projection=projection(columns, node),
        paths=literals(f.url for f in batch),
        rank=template(str(int(batch[0].rank))),
    )
    checks = template(
        sql("ledger/check_part"),
        checks=nested("ingest/validate_kv_events"),
        folder=_folder_node(batch),
    )
    bound = {"assume_utc": assume_utc, "file_rank": 0, "ops": list(OPS)}
    run_script(con, checks, bound)
    parts = columns_table({"rank": [f.rank for f in batch], "rel": [f.rel for f in batch]}, _PARTS)
    with registered(con, {"_parts": parts}):
        counts = [
            (str(rel), int(read), int(bad))
            for rel, read, bad in con.execute(sql("ledger/part_counts")).fetchall()
        ]
        tables = [
            con.sql(sql(q)).to_arrow_table()
            for q in ("ledger/quarantine_rows", "ledger/unknown_requests", "ledger/part_facts")
        ]
    return BatchCheck(counts, *tables)


def _folder_node(batch: list[LedgerFile]) -> Fragment:
    """The node of a row's folder in the check (queries/ledger/check_part.sql): the batch's
    node, or, for a batch of several nodes' parts (which all have a node column), the node of
    the row's part, by its rank (input_order // 2^40) in the batch's ranks, which run on."""
    nodes = [f.node for f in batch]
    if len(set(nodes)) == 1:
        return literal(nodes[0])
    return template(
        "kvf_of_part({nodes}, input_order, {rank})",
        nodes=literals(nodes),
        rank=template(str(int(batch[0].rank))),
    )


def _partial_seq(
    con: duckdb.DuckDBPyConnection, node: str, counts: list[FileCounts], with_seq: int
) -> pa.Table:
    """The partition's partial-seq warning (no row unless some, not all, kept events carry seq),
    as a loaded ledger gets it; the file named is the first part with kept rows."""
    kept = [c for c in counts if c.rows_loaded]
    total = sum(c.rows_loaded for c in kept)
    first = min((c.path for c in kept), default="")
    params = {"file": first, "node": node, "with_seq": with_seq, "total": total}
    return con.sql(sql("ledger/partial_seq"), params=params).to_arrow_table()
