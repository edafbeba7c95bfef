"""The one way the project runs SQL.

Every statement lives in queries/<stage>/<name>.sql and is loaded by its name
(`sql("analysis/exposures")`). Values are bound as parameters (`$name` or `?`). The few places
where SQL takes no parameter (a table or column name, a path inside a CREATE VIEW, the text of
a COMMENT) are filled by `template`, which accepts only what `ident`, `literal` and `template`
itself produce, so no other text can reach a statement.

Each load is recorded in the QueryLog that is recording at that moment (`QueryLog.recording`),
so that a run's outputs can name the exact SQL behind them. The log belongs to the run (the
investigate pipeline keeps it on its run context); outside a recording nothing is recorded."""

from __future__ import annotations

import hashlib
import re
import string
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import duckdb

from forensics.casedb.interrupts import stop_if_interrupted
from forensics.casedb.resources import resource_dir
from forensics.errors import KvfError

if TYPE_CHECKING:
    import pyarrow as pa


@dataclass(frozen=True)
class Query:
    name: str
    path: Path
    sql: str
    sha256: str


@dataclass
class QueryLog:
    """{query name: SHA-256 of its text} of every query a run loaded."""

    entries: dict[str, str] = field(default_factory=dict)

    def record(self, query: Query) -> None:
        self.entries[query.name] = query.sha256

    def vouch(self, used: dict[str, str]) -> None:
        """Count queries a stored earlier result rests on as used (an unchanged ingest is not
        repeated, but its validation queries still vouch for the loaded rows)."""
        for name, digest in used.items():
            self.entries.setdefault(name, digest)

    def used(self) -> dict[str, str]:
        """The entries sorted by name."""
        return dict(sorted(self.entries.items()))

    @contextmanager
    def recording(self) -> Iterator[QueryLog]:
        """Record every query loaded inside the `with` block (in this thread) in this log."""
        token = _RECORDING.set(self)
        try:
            yield self
        finally:
            _RECORDING.reset(token)


# Which log records loads now: set only for the time of a `QueryLog.recording()` block, and
# per thread (a context variable), so two runs never write into each other's log.
_RECORDING: ContextVar[QueryLog | None] = ContextVar("kvforensics_query_log", default=None)


@contextmanager
def recording(log: QueryLog | None = None) -> Iterator[QueryLog]:
    """Record the block's loads in `log`; without one, in the log recording now, or where none
    is (a command run on its own), in a new log for the block."""
    chosen = log if log is not None else (_RECORDING.get() or QueryLog())
    with chosen.recording():
        yield chosen


def query_names() -> list[str]:
    """The name of every query in queries/ (folder/stem), sorted."""
    folder = resource_dir("queries")
    return sorted(p.relative_to(folder).with_suffix("").as_posix() for p in folder.rglob("*.sql"))


@cache
def _read_query(name: str) -> Query:
    path = resource_dir("queries") / f"{name}.sql"
    if not path.is_file():
        known = ", ".join(query_names())
        raise KvfError(f"no query named '{name}'; known queries: {known}")
    text = path.read_text(encoding="utf-8")
    return Query(name, path, text, hashlib.sha256(text.encode("utf-8")).hexdigest())


def load_query(name: str) -> Query:
    """Load queries/<name>.sql (name: folder/stem) and record it in the log recording now."""
    query = _read_query(name)
    log = _RECORDING.get()
    if log is not None:
        log.record(query)
    return query


def sql(name: str) -> str:
    """The text of queries/<name>.sql."""
    return load_query(name).sql


# -- scripts -----------------------------------------------------------------------------------

_PARAM = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")
# One token of a script: a quoted string or name, a line comment, a ';', or any other character.
_TOKEN = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|--[^\n]*|;|[^'\";-]+|.", re.DOTALL)


def statements(script: str) -> list[str]:
    """The statements of a script: split on each ';' outside strings, quoted names and
    comments; chunks holding only comments are dropped."""
    out: list[str] = []
    current: list[str] = []
    code = False  # the current chunk holds more than comments and blanks
    for token in _TOKEN.findall(script):
        if token == ";":
            if code:
                out.append("".join(current).strip())
            current, code = [], False
            continue
        current.append(token)
        code = code or (not token.startswith("--") and bool(token.strip()))
    if code:
        out.append("".join(current).strip())
    return out


def _named(statement: str) -> set[str]:
    """The $parameters a statement names in its code (not in strings or comments)."""
    code = (t for t in _TOKEN.findall(statement) if not t.startswith(("--", "'", '"')))
    return {name for token in code for name in _PARAM.findall(token)}


def run_script(
    con: duckdb.DuckDBPyConnection, script: str, params: dict[str, Any] | None = None
) -> None:
    """Execute each statement, binding only the parameters that statement names."""
    params = params or {}
    for statement in statements(script):
        stop_if_interrupted(workers_only=True)  # Ctrl-C came: a worker begins no statement
        if not params:  # nothing to bind: no need to find the names a statement uses
            con.execute(statement)
            continue
        names = _named(statement)
        bound = {k: v for k, v in params.items() if k in names}
        con.execute(statement, bound) if bound else con.execute(statement)


def run_at_once(con: duckdb.DuckDBPyConnection, *scripts: str) -> None:
    """Execute the statements of scripts that take no parameters in one call (DuckDB runs them
    in turn); each script is split on its own, so a comment that ends one cannot swallow the
    next. For the fifty statements that set a connection up (settings, macros, tables where
    missing): sent one by one, they took twice as long (opening an in-memory database with
    them, 40 ms where it now takes 20, which every partition task and ledger check pays once
    per thread)."""
    stop_if_interrupted(workers_only=True)
    con.execute(";\n".join(s for script in scripts for s in statements(script)))


def one_row(cur: duckdb.DuckDBPyConnection) -> tuple[Any, ...] | None:
    """The first row of an executed statement, its result read to the end. (A result left
    unfinished, as fetchone leaves it, keeps the connection from registering a table or
    running a relation until the next statement.)"""
    rows = cur.fetchall()
    return rows[0] if rows else None


def first_row(
    con: duckdb.DuckDBPyConnection, script: str, params: dict[str, Any] | None = None
) -> tuple[Any, ...] | None:
    """Execute a script of one statement, binding only the parameters it names; its first row
    (an INSERT's is the number of rows it inserted)."""
    (statement,) = statements(script)
    stop_if_interrupted(workers_only=True)
    names = _named(statement)
    bound = {k: v for k, v in (params or {}).items() if k in names}
    return one_row(con.execute(statement, bound))


def run(
    con: duckdb.DuckDBPyConnection,
    name: str,
    params: dict[str, Any] | None = None,
    /,
    **parts: Fragment,
) -> None:
    """Run the script queries/<name>.sql: its {placeholders} filled from `parts` (see
    `template`), then each statement with the parameters it names."""
    text = sql(name)
    run_script(con, template(text, **parts) if parts else text, params)


@contextmanager
def registered(con: duckdb.DuckDBPyConnection, tables: dict[str, pa.Table]) -> Iterator[None]:
    """Arrow tables readable by name in the block's queries, and gone after it."""
    for name, table in tables.items():
        con.register(name, table)
    try:
        yield
    finally:
        for name in tables:
            con.unregister(name)


def append_rows(con: duckdb.DuckDBPyConnection, table: str, rows: pa.Table) -> None:
    """Append Arrow rows to `table`, column by column name (nothing when there are none)."""
    if rows.num_rows == 0:
        return
    with registered(con, {"_rows_to_append": rows}):
        run(con, "schema/append_rows", table=ident(table))


# -- the catalog ---------------------------------------------------------------------------------


class Relation(NamedTuple):
    schema: str  # 'main' or 'work'
    name: str
    comment: str | None
    view: bool


def relations(con: duckdb.DuckDBPyConnection) -> list[Relation]:
    """The case database's own tables and views (TEMP ones excluded), sorted."""
    return [Relation(*row) for row in con.execute(sql("schema/tables")).fetchall()]


def tables(con: duckdb.DuckDBPyConnection, *, views: bool = False) -> list[str]:
    """The names of the tables (and views, if asked) in the main schema, sorted."""
    return [r.name for r in relations(con) if r.schema == "main" and (views or not r.view)]


# -- identifiers and literals --------------------------------------------------------------------


class Fragment(str):
    """SQL text that `ident`, `literal` or `template` made: the only text `template` accepts."""


_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def ident(name: str) -> Fragment:
    """A table or column name, quoted. Only plain names (letters, digits, '_', not starting with
    a digit), optionally schema-qualified (`work.pieces`), are accepted."""
    parts = name.split(".")
    if not name or len(parts) > 2 or not all(_IDENT.fullmatch(p) for p in parts):
        raise KvfError(
            f"'{name}' is not a table or column name this tool uses; names are letters, digits "
            "and '_' (not starting with a digit), optionally schema.name"
        )
    return Fragment(".".join('"' + p + '"' for p in parts))


def literal(text: str) -> Fragment:
    """A quoted SQL string literal, only where DuckDB takes no parameter (a path inside a CREATE
    VIEW, the text of a COMMENT)."""
    return Fragment("'" + text.replace("'", "''") + "'")


def literals(texts: Iterable[str]) -> Fragment:
    """A SQL list of quoted string literals: ['a', 'b']."""
    return Fragment("[" + ", ".join(literal(t) for t in texts) + "]")


def join(fragments: Iterable[Fragment], sep: str = ", ") -> Fragment:
    """Fragments joined by a separator (', ' or ' AND ' and the like: no SQL of its own)."""
    if sep.strip() not in ("", ",", "AND", "OR"):
        raise KvfError(f"'{sep}' is not a separator template joins on")
    parts = list(fragments)
    for part in parts:
        _check_part("join", part)
    return Fragment(sep.join(parts))


def nested(name: str) -> Fragment:
    """The one statement of queries/<name>.sql, to nest inside another (a COPY's query)."""
    (statement,) = statements(sql(name))
    return Fragment(statement)


def template(text: str, /, **parts: Fragment) -> Fragment:
    """`text` with each {name} replaced by parts[name] (comments are dropped first, so that
    they may name the placeholders). Every part must come from `ident`, `literal`, `join`,
    `nested` or `template`; every placeholder must be given and every part used."""
    code = "".join(t for t in _TOKEN.findall(text) if not t.startswith("--"))
    wanted = {field for _, field, _, _ in string.Formatter().parse(code) if field}
    if wanted != set(parts):
        raise KvfError(
            f"template placeholders {sorted(wanted)} do not match the parts given {sorted(parts)}"
        )
    for key, value in parts.items():
        _check_part(key, value)
    return Fragment(code.format(**parts))


def _check_part(key: str, value: object) -> None:
    if not isinstance(value, Fragment):
        raise KvfError(
            f"'{key}' is plain text ({value!r}); quote a name with ident() or a value with "
            "literal(), or bind the value as a parameter"
        )
