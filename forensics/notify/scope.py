"""Scoping the lists, the report and the figures (--since, --until, --account).

Within `scoped(con, scope)`, TEMP tables hide the case database's exposure tables with the rows
in scope (queries/notify/scope_*.sql say the rule for each), and the notification tables
(affected_requests, affected_accounts) are counted again from them by the analysis' own queries,
with replay's confirmations applied again; every later query of the connection reads them.
Nothing is written to the case database. The ledger's ownership violations, the node evidence,
the gateway log's request count and the quarantine describe the whole case and are not scoped."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import duckdb

from forensics.analysis.aggregate import affected_tables
from forensics.casedb.sql import ident, run_script, sql, template
from forensics.options import Scope

# The tables cut to the scope, in this order (queries/notify/scope_<table>.sql each).
SCOPED = (
    "exposures",
    "exposure_tokens",
    "reconstructed_exposures",
    "reconstructed_other_ways",
    "possible_exposures",
    "screening",
)
# Counted again from the scoped tables (queries/analysis/affected_*.sql, then replay's).
RECOUNTED = ("affected_requests", "affected_accounts")
CONFIRMATIONS = ("replay/confirm_affected_requests", "replay/confirm_affected_accounts")


def _temp_tables(con: duckdb.DuckDBPyConnection) -> set[str]:
    return {r[0] for r in con.execute(sql("report/temp_tables")).fetchall()}


def _put(con: duckdb.DuckDBPyConnection, name: str, made: list[str]) -> None:
    """Move kvf_scope_<name> in place of `name` (a TEMP table of this run, or a new one)."""
    parts = {"table": ident(name), "source": ident(f"kvf_scope_{name}")}
    if name in _temp_tables(con):
        run_script(con, template(sql("notify/scope_replace"), **parts))
    else:
        run_script(con, template(sql("notify/scope_create"), **parts))
        made.append(name)


@contextmanager
def scoped(con: duckdb.DuckDBPyConnection, scope: Scope) -> Iterator[None]:
    """Hide the exposure and notification tables with their rows in `scope` (nothing for the
    whole case); drop what it made afterwards."""
    if scope.whole:
        yield
        return
    params = {
        "since": scope.since,
        "until": scope.until,
        "accounts": list(scope.accounts),
    }
    made: list[str] = []
    try:
        run_script(con, sql("notify/scope_macro"))
        recount = bool(con.execute(sql("notify/scope_recountable")).fetchall()[0][0])
        for name in SCOPED if recount else SCOPED[:4]:
            con.execute(sql(f"notify/scope_{name}"), params)
            _put(con, name, made)
        if recount:
            present = _temp_tables(con)
            for name in RECOUNTED:
                if name not in present:
                    con.execute(template(sql("notify/scope_empty_copy"), table=ident(name)))
                    made.append(name)
            affected_tables(con)
            for name in CONFIRMATIONS:
                run_script(con, sql(name))
        yield
    finally:
        for name in made:
            con.execute(template(sql("report/drop_stand_in"), table=ident(name)))
