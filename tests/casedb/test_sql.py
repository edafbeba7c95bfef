"""forensics.casedb.sql: the query log of a run, the script splitter, identifier templating, and
that queries/ holds exactly the queries the code loads."""

from __future__ import annotations

import ast
import hashlib
import re
import shutil
import threading
from pathlib import Path

import duckdb
import pytest
from support.paths import EXAMPLES, REPO

from forensics.casedb.sql import (
    QueryLog,
    ident,
    join,
    literal,
    load_query,
    one_row,
    query_names,
    run_at_once,
    statements,
    template,
)
from forensics.errors import KvfError
from forensics.ingest.load import ingest_case

QUERIES = REPO / "queries"
CODE = ("forensics", "benchmarks", "scripts")


def _copy_case(folder: Path, tables: tuple[str, ...]) -> Path:
    """The worked example semantics-seq with only these input tables."""
    folder.mkdir(parents=True)
    for table in tables:
        shutil.copy(EXAMPLES / "semantics-seq" / f"{table}.csv", folder / f"{table}.csv")
    return folder


def test_two_runs_in_one_process_keep_separate_logs(tmp_path: Path) -> None:
    """Two ingests run at once in two threads, each recording into its own log: each log holds
    exactly what its own run loaded (only the case with a ledger loads its validation)."""
    inputs = ("accounts", "nodes", "requests")
    cases = [
        _copy_case(tmp_path / "plain", inputs),
        _copy_case(tmp_path / "ledger", (*inputs, "kv_events")),
    ]
    logs = [QueryLog(), QueryLog()]
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            with logs[i].recording():
                ingest_case(cases[i], tmp_path / f"case{i}.duckdb")
        except BaseException as exc:  # reported below, with the thread's own error
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    without, with_events = (log.used() for log in logs)
    assert "ingest/validate_requests" in without and "ingest/validate_requests" in with_events
    assert "ingest/validate_kv_events" in with_events
    assert "ingest/validate_kv_events" not in without
    for name, digest in with_events.items():  # each entry is the file's own SHA-256
        assert digest == hashlib.sha256((QUERIES / f"{name}.sql").read_bytes()).hexdigest()


def test_loads_outside_a_recording_reach_no_log() -> None:
    log = QueryLog()
    with log.recording():
        load_query("figures/headline")
    load_query("report/kinds")
    with QueryLog().recording():
        load_query("report/nodes")
    assert list(log.used()) == ["figures/headline"]


def test_statements_split_only_outside_strings_names_and_comments() -> None:
    script = (
        "-- a comment; with a semicolon\n"
        "CREATE TEMP TABLE \"a;b\" AS SELECT 'x; -- y' AS v;  -- trailing; comment\n"
        "-- only a comment;\n"
        "INSERT INTO \"a;b\" VALUES ('it''s;');\n"
        'SELECT count(*) FROM "a;b"'
    )
    parts = statements(script)
    assert len(parts) == 3
    con = duckdb.connect()
    for part in parts[:2]:
        con.execute(part)
    assert con.execute(parts[2]).fetchall() == [(2,)]
    assert sorted(r[0] for r in con.execute('SELECT v FROM "a;b"').fetchall()) == [
        "it's;",
        "x; -- y",
    ]


def test_a_set_up_script_runs_whole_in_one_call() -> None:
    """Every statement of the script runs, in turn, however its comments and strings hold
    semicolons; a failing statement stops it with DuckDB's own error."""
    script = (
        "-- a comment; with a semicolon\n"
        "CREATE TEMP TABLE \"a;b\" AS SELECT 'x; -- y' AS v;  -- trailing; comment\n"
        "-- only a comment;\n"
        "INSERT INTO \"a;b\" VALUES ('it''s;');\n"
        "CREATE MACRO twice(x) AS x * 2;\n"
        "-- a last comment, no statement after it\n"
    )
    con = duckdb.connect()
    run_at_once(con, script)
    assert sorted(r[0] for r in con.execute('SELECT v FROM "a;b"').fetchall()) == [
        "it's;",
        "x; -- y",
    ]
    assert con.execute("SELECT twice(21)").fetchall() == [(42,)]
    with pytest.raises(duckdb.CatalogException):
        run_at_once(con, "CREATE TEMP TABLE c AS SELECT 1 AS v; SELECT * FROM missing")
    # several scripts: one that ends in a comment without a line break does not hide the next
    run_at_once(
        con, "CREATE TEMP TABLE d AS SELECT 1 AS v; -- no line break", "INSERT INTO d VALUES (2)"
    )
    assert con.execute("SELECT sum(v) FROM d").fetchall() == [(3,)]


def test_template_takes_only_quoted_names_and_literals() -> None:
    con = duckdb.connect()
    query = template(
        "SELECT {text} AS {name}", text=literal("O'Brien -- ; 'x'"), name=ident("who_is")
    )
    cursor = con.execute(query)
    assert [d[0] for d in cursor.description or []] == ["who_is"]
    assert cursor.fetchall() == [("O'Brien -- ; 'x'",)]
    assert ident("work.analysis_requests") == '"work"."analysis_requests"'
    assert join([ident("a"), ident("b")]) == '"a", "b"'
    with pytest.raises(KvfError, match="plain text"):
        template("SELECT * FROM {table}", table="requests; DROP TABLE requests")  # type: ignore[arg-type]
    with pytest.raises(KvfError, match="do not match"):
        template("SELECT * FROM {table}", name=ident("x"))
    for bad in ('requests"; DROP TABLE x; --', "1abc", "a.b.c", "", "a b"):
        with pytest.raises(KvfError, match="not a table or column name"):
            ident(bad)


def test_template_ignores_placeholders_named_in_comments() -> None:
    text = "-- {table}: the table, {other} in a comment\nSELECT * FROM {table}"
    assert template(text, table=ident("t")) == '\nSELECT * FROM "t"'


def _code_strings() -> tuple[set[str], list[re.Pattern[str]]]:
    """Every string constant in the code, and every f-string as a pattern (its fields: names)."""
    constants: set[str] = set()
    patterns: list[re.Pattern[str]] = []
    for folder in CODE:
        for path in (REPO / folder).rglob("*.py"):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            in_fstrings = {
                id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values
            }
            for node in ast.walk(tree):
                if isinstance(node, ast.Constant) and isinstance(node.value, str):
                    if id(node) not in in_fstrings:
                        constants.add(node.value)
                elif isinstance(node, ast.JoinedStr):
                    parts = [
                        re.escape(str(v.value)) if isinstance(v, ast.Constant) else "[a-z_]+"
                        for v in node.values
                    ]
                    patterns.append(re.compile("".join(parts)))
    return constants, patterns


def test_every_query_is_used_and_every_name_loaded_exists() -> None:
    names = query_names()
    folders = sorted({n.split("/")[0] for n in names})
    assert all(n.count("/") == 1 for n in names)  # one stage folder level
    assert not list(QUERIES.glob("*.sql")), "every query lives in a stage folder"
    constants, patterns = _code_strings()
    # f-strings that build a query name: they start with a stage folder
    loaders = [p for p in patterns if any(p.pattern.startswith(f"{f}/") for f in folders)]
    unused = [n for n in names if n not in constants and not any(p.fullmatch(n) for p in loaders)]
    assert not unused, f"queries no code loads: {unused}"
    name_like = re.compile(rf"(?:{'|'.join(folders)})/[a-z0-9_]+")
    missing = sorted(c for c in constants if name_like.fullmatch(c) and c not in names)
    assert not missing, f"names loaded that are not in queries/: {missing}"
    assert all(any(p.fullmatch(n) for n in names) for p in loaders), loaders


def _listed_queries(report: Path) -> dict[str, str]:
    html = report.read_text(encoding="utf-8")
    row = re.compile(
        r'<td class="mono">([a-z_]+/[a-z_]+)</td><td class="mono hash">([0-9a-f]{64})</td>'
    )
    return dict(row.findall(html))


def test_report_lists_its_own_queries_each_time(tmp_path: Path) -> None:
    """Two reports written in one process list the same queries: the report's and the exports'
    own, each with its file's SHA-256, and nothing a surrounding run loaded before."""
    from support.report_case import build_case, seq_tables

    from forensics.report.casedb import open_case
    from forensics.report.stage import write_all

    db = build_case(tmp_path / "case.duckdb", seq_tables())
    listed = []
    for i in range(2):
        log = QueryLog()
        with log.recording():
            load_query("ingest/counts")  # loaded by the run before its export stage
        con = open_case(db)
        try:
            write_all(con, tmp_path / f"out{i}", queries=log)
        finally:
            con.close()
        listed.append(_listed_queries(tmp_path / f"out{i}" / "report.html"))
        assert "ingest/counts" in log.used()
    assert listed[0] == listed[1]
    names = set(listed[0])
    assert {"figures/headline", "notify/lists", "schema/tables"} <= names
    assert all(
        n.startswith(("figures/", "report/", "notify/")) or n == "schema/tables" for n in names
    )
    for name, digest in listed[0].items():
        assert digest == hashlib.sha256((QUERIES / f"{name}.sql").read_bytes()).hexdigest()


def test_one_row_leaves_the_connection_free_for_the_next_step() -> None:
    """fetchone leaves a result unfinished, and DuckDB then refuses to register a table or run
    a relation on that connection: the package reads first rows with one_row, never fetchone."""
    import pyarrow as pa

    con = duckdb.connect()
    assert one_row(con.execute("SELECT 1 UNION ALL SELECT 2 ORDER BY 1")) == (1,)
    con.register("_t", pa.table({"a": [3]}))
    assert con.sql("SELECT a FROM _t").fetchall() == [(3,)]
    assert one_row(con.execute("SELECT 1 WHERE false")) is None
    users = [
        str(p.relative_to(REPO))
        for p in sorted((REPO / "forensics").rglob("*.py"))
        if ".fetchone(" in p.read_text()
    ]
    assert users == []
