"""In-memory DuckDB databases for the tasks a pool of threads runs one after another: the
ledger's checks at ingest and the partition tasks of the analysis, one per engine node.

Opening a DuckDB database costs about 40 ms, and its settings and macros as much again; a
ledger kept outside the case has a partition per engine node, so a fleet of hundreds of nodes
paid that hundreds of times. A pool thread here opens its database on its first task and keeps
it until the pool closes. Each task still starts from nothing: it gets a connection of its own
(DuckDB keeps settings, macros, TEMP objects and registered tables per connection) whose default
catalog is an empty in-memory one attached for it, and detached, with all the task made in it,
when it ends. What a task made cannot reach the next: the tests run tasks of different
partitions on one thread and compare their tables with a loaded ledger's."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb

from forensics.casedb.dbopen import open_database, prepare_connection
from forensics.casedb.sql import ident, run


class ScratchDatabases:
    """One in-memory database per thread that asks for one, each within memory_limit (None: the
    default) and spilling beside the case database `spill_beside` (None: to the system's
    temporary folder). Close it once the threads are done."""

    def __init__(self, memory_limit: str | None = None, spill_beside: Path | None = None):
        self.memory_limit = memory_limit
        self.spill_beside = spill_beside
        self._mine = threading.local()
        self._opened: list[duckdb.DuckDBPyConnection] = []
        self._lock = threading.Lock()
        self._names = itertools.count()

    def _database(self) -> duckdb.DuckDBPyConnection:
        db = getattr(self._mine, "db", None)
        if db is None:
            db = open_database(
                ":memory:",
                schema=False,
                memory_limit=self.memory_limit,
                spill_beside=self.spill_beside,
            )
            with self._lock:
                self._opened.append(db)
            self._mine.db = db
        return db

    @contextmanager
    def connection(self, schema: bool = True) -> Iterator[duckdb.DuckDBPyConnection]:
        """A connection of the calling thread's database, in a catalog of its own, with the
        project's settings and macros and, when `schema`, the input tables."""
        db = self._database()
        with self._lock:
            name = ident(f"task_{next(self._names)}")
        con = db.cursor()
        try:
            run(con, "schema/scratch_attach", name=name)
            prepare_connection(con, self.memory_limit, schema=schema)
            yield con
        finally:
            con.close()
            run(db, "schema/scratch_detach", name=name)

    def close(self) -> None:
        with self._lock:
            opened, self._opened = self._opened, []
        for db in opened:
            db.close()


@contextmanager
def scratch_connection(
    pool: ScratchDatabases | None,
    memory_limit: str | None = None,
    spill_beside: Path | None = None,
    schema: bool = True,
) -> Iterator[duckdb.DuckDBPyConnection]:
    """A connection of the pool's (see ScratchDatabases.connection), or, without one (a Ray
    task, alone in its process), a database opened for it and closed after it."""
    if pool is not None:
        with pool.connection(schema=schema) as con:
            yield con
        return
    con = open_database(
        ":memory:", schema=schema, memory_limit=memory_limit, spill_beside=spill_beside
    )
    try:
        yield con
    finally:
        con.close()
