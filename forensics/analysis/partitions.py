"""The sweep of a ledger kept outside the case database (forensics.ledger): one task per
partition, which reads only its node's Parquet parts, here in threads or as Ray tasks.

A task opens its own in-memory DuckDB over its parts (the same typed view as the case's, less
the quarantined rows), codes requests and content hashes locally, orders, sweeps and stores the
node's pieces, folds its exposure pieces into runs (forensics.analysis.runfacts) from the
events they name, read by their rows alone, and returns them with its request codes and the
events its violation pieces name (analysis_piece_events). The driver numbers requests over the
whole case, renumbers each node's findings and stores them (forensics.analysis.merge), so the
tables that follow are those of a loaded ledger."""

from __future__ import annotations

import sys
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from contextlib import closing
from dataclasses import replace
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa

from forensics.analysis import order
from forensics.analysis.budget import DUCKDB_STREAM_SHARE, MemoryBudget, sweep_budget, task_need
from forensics.analysis.fetch import NodeInfo
from forensics.analysis.merge import PartitionFindings, store
from forensics.analysis.order import NodeFindings
from forensics.analysis.runfacts import ExposureRuns, facts_at, fold_runs, no_pieces
from forensics.analysis.tasks import grouped, largest_first, tasks_of
from forensics.base.arrow import from_numpy
from forensics.base.progress import ProgressFn, no_progress
from forensics.base.raytasks import cluster_cpus, ray_session, run_tasks, task_memory
from forensics.casedb.dbopen import database_file
from forensics.casedb.scratch import ScratchDatabases
from forensics.casedb.sql import (
    append_rows,
    ident,
    one_row,
    registered,
    run,
    run_script,
    sql,
    template,
)
from forensics.errors import InputError, disk_full, interrupted
from forensics.ledger.copies import copy_groups, remove_copies
from forensics.ledger.external import (
    LedgerFile,
    check_digest,
    check_digests,
    folder_of,
    open_connection,
    sha256_of,
)
from forensics.ledger.mirror import Waiting, mirrored
from forensics.ledger.storage import STORAGE_FIX, StorageError
from forensics.ledger.store import ledger_meta
from forensics.ledger.view import NAMED_ALONE_ROWS, Copies, PartView, view_sql

# What reading a damaged or missing part raises.
UNREADABLE = (duckdb.IOException, duckdb.InvalidInputException, OSError)


def sweep_partition(
    parts: list[PartView],
    assume_utc: bool,
    quarantine: pa.Table,
    recorded: dict[str, tuple[str, int]],
    facts: pa.Table | None = None,
    threads: int = 1,
    memory_limit: str | None = None,
    budget: MemoryBudget | None = None,
    spill_beside: Path | None = None,
    pool: ScratchDatabases | None = None,
    waiting: Waiting | None = None,
) -> PartitionFindings:
    """The task: read, order and sweep one partition (its parts only), its DuckDB on `threads`
    threads and within memory_limit (None: the default). Each part's SHA-256 and size are
    computed beside the reads and must be those ingest recorded (`recorded`, by part name):
    a part changed since it was ingested is an error, never a silent analysis of other
    evidence. Parts at an fsspec URL are fetched once into local copies, hashed as they
    arrive and checked before they are read (forensics.ledger.mirror). facts: what ingest
    recorded of the parts' kept rows, which spare the task a pass over them; None for a case
    ingested before ingest recorded them. budget: the run's memory budget, when the task runs
    in a thread of the driver: its node's arrays are held in it once the pass that lists the
    node has counted them (forensics.analysis.order.load_within), so that as many partitions
    are swept at once as fit. Without one (a Ray task, whose memory
    Ray holds for it) nothing waits. spill_beside: the case database, when the task runs on its
    machine (its DuckDB spills beside it; elsewhere to the system's temporary folder). pool:
    the databases of the threads that run the tasks one after another (forensics.casedb.scratch);
    None: the task opens a database of its own (a Ray task). waiting: told when the task
    waits for room on its disk for its remote parts' copies (forensics.ledger.mirror)."""
    files = [p.file for p in parts]
    sizes = {rel: size for rel, (_, size) in recorded.items()}  # the room the copies take
    try:
        with (
            mirrored(parts, spill_beside, sizes, waiting) as (read, fetched),
            ThreadPoolExecutor(max_workers=1) as hasher,
        ):
            for f in files:  # a remote part: hashed as it was fetched, checked before any read
                if f.rel in fetched:
                    check_digest(f, fetched[f.rel], recorded.get(f.rel))
            here = [p.file for p in read if p.file.rel not in fetched]
            digests = [(f, hasher.submit(sha256_of, f.url)) for f in here]
            try:
                found = _sweep_partition(
                    read,
                    assume_utc,
                    quarantine,
                    facts,
                    threads,
                    memory_limit,
                    budget,
                    spill_beside,
                    pool,
                )
            except UNREADABLE:
                raise  # the part is damaged: the read's own error says how
            except Exception as exc:
                if interrupted(exc):  # Ctrl-C: the parts not hashed yet are left unhashed
                    for _, digest in digests:
                        digest.cancel()
                    raise
                # a part changed since ingest explains any other failure (its recorded facts
                # no longer hold, say): that is reported, not what it made fail
                check_digests(digests, recorded)
                raise
            check_digests(digests, recorded)
        return found
    except UNREADABLE as exc:
        if disk_full(exc) is not None:  # this machine's disk (a spill), not the ledger
            raise
        raise InputError(
            f"the {_named(files)} cannot be read: {exc}",
            path=_folder(files),  # the read's error names the part
            fix=STORAGE_FIX
            if isinstance(exc, StorageError)
            else "make the external ledger readable where it was ingested from, or ingest the "
            "case anew",
        ) from exc


def _sweep_partition(
    parts: list[PartView],
    assume_utc: bool,
    quarantine: pa.Table,
    facts: pa.Table | None,
    threads: int,
    memory_limit: str | None,
    budget: MemoryBudget | None,
    spill_beside: Path | None,
    pool: ScratchDatabases | None,
) -> PartitionFindings:
    copied: Copies = {}
    try:
        with open_connection([p.file.url for p in parts], memory_limit, spill_beside, pool) as con:
            run(con, "ledger/task_threads", threads=template(str(max(1, int(threads)))))
            append_rows(con, "quarantine", quarantine)
            copied = copy_groups(con, parts)  # many small parts: read once, into one local file
            plain = _view_and_codes(con, parts, assume_utc, copied)

            def view_sql_of(own: list[PartView]) -> str:
                return view_sql(own, assume_utc, plain=plain, copied=copied)

            run_script(con, sql("analysis/pieces_create"))
            if facts is not None:
                with registered(con, {"_part_facts": facts}):
                    order.make_ledger_nodes(con, "analysis/ledger_nodes_recorded")
            within = budget or MemoryBudget(sys.maxsize)  # a Ray task: Ray holds its memory
            infos = order.node_list(con, counted=facts is not None)
            found = _sweep_nodes(con, parts, infos, within, view_sql_of)
            # the events the pieces name, read from the parts by their rows alone
            _name_events(con, found)
            alone = _large_parts(infos)
            run_script(con, view_sql(parts, assume_utc, named=True, alone=alone, copied=copied))
            runs = _exposure_runs(con, found)  # the named events are read here, once
            run_script(con, sql("analysis/piece_events_named"))  # those of violations again
            # the runs stand for the exposure pieces from here on: the pieces stay in the task
            found = [replace(f, exposures=no_pieces()) for f in found]
            ids = con.sql(sql("analysis/request_code_list")).to_arrow_table()
            events = con.sql(sql("analysis/piece_events_all")).to_arrow_table()
            facts = [
                _rows(con, t) for t in ("temp.analysis_ledger_nodes", "temp.analysis_request_nodes")
            ]
    finally:
        remove_copies(copied)
    return PartitionFindings(found, runs, ids, events, *facts)


def _sweep_nodes(
    con: duckdb.DuckDBPyConnection,
    parts: list[PartView],
    infos: list[NodeInfo],
    within: MemoryBudget,
    view_sql_of: Callable[[list[PartView]], str],
) -> list[NodeFindings]:
    """Load and sweep the task's nodes one by one, in node order (the order they are stored
    in). In a task of several small partitions each node is read through a view of its own
    parts (view_sql_of): DuckDB plans a read over every branch of a view, which costs more than
    a small node's read itself."""
    own: dict[str, list[PartView]] = {}
    for p in parts:
        own.setdefault(p.file.node, []).append(p)
    found = []
    for info in sorted(infos, key=lambda i: i.node):
        if len(own) > 1:
            run_script(con, view_sql_of(own[info.node]))
        events, held = order.load_within(con, info, within)
        found.append(order.find_within(events, within, held))
        del events
    if len(own) > 1:  # kv_events is the task's whole view again
        run_script(con, view_sql_of(parts))
    return found


# Text columns the passes over a whole partition read: as they are when every value is already
# as ingest keeps it (see _view_and_codes).
PLAIN_TEXT = frozenset({"request_id", "content_hash"})


def _view_and_codes(
    con: duckdb.DuckDBPyConnection, parts: list[PartView], assume_utc: bool, copied: Copies
) -> frozenset[str]:
    """The kv_events view and the request and hash codes of the partition. Ingest keeps a text
    value trimmed (kvf_str), but trimming every row costs half of the pass that makes the codes
    and a sixth of the sweep's input (each row's value is then trimmed and joined, where DuckDB
    otherwise works once per value of the Parquet dictionary). So the view first reads request
    ids and content hashes as they are, and the codes, which name every distinct value the
    partition's kept rows hold, tell whether any of them has blanks around it (or is blank).
    If one has, the view and the codes are made again with the trim, so the values are those
    of the loaded ledger either way. Returns the text columns the view reads as they are."""
    nodes = {p.file.node for p in parts}  # one partition's, or a few small ones' together
    node = nodes.pop() if len(nodes) == 1 else None
    run_script(con, view_sql(parts, assume_utc, plain=PLAIN_TEXT, copied=copied))
    order.make_codes(con, node)
    row = one_row(con.execute(sql("analysis/codes_plain")))
    if row is None or not row[0]:
        run_script(con, view_sql(parts, assume_utc, copied=copied))
        order.make_codes(con, node)
        return frozenset()
    return PLAIN_TEXT


def _large_parts(infos: list[NodeInfo]) -> frozenset[int]:
    """Ranks of the parts of NAMED_ALONE_ROWS events or more (the span of their keys)."""
    spans = [(lo, hi) for i in infos for lo, hi in i.files]
    return frozenset(lo // KEY_PART for lo, hi in spans if hi - lo + 1 >= NAMED_ALONE_ROWS)


KEY_PART = 1 << 40  # an event's key is its part's rank * KEY_PART + its row


def _name_events(con: duckdb.DuckDBPyConnection, found: list[NodeFindings]) -> None:
    """temp.analysis_named_keys: the keys of the events the partition's pieces name."""
    exposed = [f.exposures.named for f in found]
    violating = [f.violations[:, 0].astype(np.int64) for f in found]
    keys = np.concatenate([np.empty(0, np.int64), *exposed, *violating])
    flags = np.zeros(len(keys), np.int8)
    flags[sum(len(k) for k in exposed) :] = 1  # 1: the event of a violation piece
    named = pa.table({"event_key": from_numpy(keys), "violation": from_numpy(flags)})
    with registered(con, {"_named_keys": named}):
        run_script(con, sql("analysis/named_keys"))


def _exposure_runs(con: duckdb.DuckDBPyConnection, found: list[NodeFindings]) -> list[ExposureRuns]:
    """Each node's exposure runs, the columns of the events their pieces name read in one pass
    over the partition's named events (kv_named_events)."""
    facts = con.sql(sql("analysis/named_event_facts")).to_arrow_table()
    return [fold_runs(f.exposures, facts_at(facts, f.exposures.named)) for f in found]


def _rows(con: duckdb.DuckDBPyConnection, table: str) -> pa.Table:
    return con.sql(template(sql("analysis/ledger_facts_rows"), table=ident(table))).to_arrow_table()


def sweep_external(
    con: duckdb.DuckDBPyConnection,
    ray: str | None,
    workers: int = 2,
    progress: ProgressFn = no_progress,
    warming: Future[None] | None = None,
) -> None:
    """Sweep every partition of the case's external ledger and store the pieces, the global
    request codes and analysis_piece_events in the case database. warming: the compiled code
    being loaded (order.warming_up), when the caller started it."""
    meta = ledger_meta(con)
    assert meta is not None, "the case's ledger is loaded, not external"
    warming = warming or order.warming_up()  # beside the SQL (here: the tasks' first)
    args, rows = tasks_of(con, meta, ray, workers)
    if ray is None:  # small partitions swept together here (a Ray task reads one partition)
        args, rows = grouped(args, rows, workers)
    if ray is not None:  # the tasks run elsewhere: compiled here first, so that they load it
        order.warmed_up(warming, progress)
    # The largest partitions start first, so that a large one does not start last and run
    # alone at the end while the other workers are idle; results are stored in partition order.
    starts = largest_first(rows)
    found: dict[int, PartitionFindings] = {}
    if ray is None:
        # Each task has its own DuckDB and the sweep releases the GIL: `workers` partitions run
        # at once in threads. Each task's DuckDB gets its share of DuckDB's part of the limit,
        # which, as for a loaded ledger, only reads and codes the events; a task holds its
        # node's arrays in the memory budget once it has counted them, so as many nodes are
        # swept at once as fit (forensics.analysis.budget).
        with sweep_budget(con, DUCKDB_STREAM_SHARE) as budget:
            task_limit = f"{max(1, budget.duckdb_bytes // max(1, workers)) >> 10}KiB"
            case_file = database_file(con)
            # each thread's DuckDB database is opened once, for all the tasks it runs
            databases = ScratchDatabases(task_limit, case_file)

            def within_budget(i: int) -> PartitionFindings:
                return sweep_partition(
                    *args[i],
                    memory_limit=task_limit,
                    budget=budget,
                    spill_beside=case_file,
                    pool=databases,
                    waiting=lambda what: progress(what, 0, None),
                )

            progress("sweep", 0, len(args))
            with (
                closing(databases),
                ThreadPoolExecutor(max_workers=max(1, workers)) as pool,
            ):
                tasks = {pool.submit(within_budget, i): i for i in starts}
                try:
                    order.warmed_up(warming, progress)  # loaded while the tasks read their parts
                    for done in as_completed(tasks):
                        found[tasks[done]] = done.result()
                        progress("sweep", len(found), len(args))
                except BaseException:  # a failure or an interrupt: the tasks not yet started
                    for task in tasks:  # never start (those running end first)
                        task.cancel()
                    raise
    else:
        with ray_session(ray, workers) as session:
            task = session.remote(num_cpus=1, max_retries=1)(sweep_partition)
            memory = task_memory(session)

            def submit(i: int) -> Any:  # Ray places a task by its size
                return task.options(**memory(task_need(rows[i]))).remote(*args[i])

            def take(i: int, r: PartitionFindings) -> None:
                found[i] = r

            run_tasks(
                session,
                starts,
                submit,
                take,
                in_flight=2 * cluster_cpus(session),
                progress=progress,
            )
    store(con, [found[i] for i in range(len(args))])


def _folder(files: list[LedgerFile]) -> str:
    """The partition's node=NAME folder; for several partitions, the ledger's folder."""
    folders = sorted({folder_of(f.url) for f in files})
    return folders[0] if len(folders) == 1 else folder_of(folders[0])


def _named(files: list[LedgerFile]) -> str:
    """The task's partition, or its partitions (small ones are swept together)."""
    nodes = sorted({f.node for f in files})
    return ("partition " if len(nodes) == 1 else "partitions ") + ", ".join(
        f"node={n}" for n in nodes
    )
