"""Ctrl-C while a DuckDB statement runs: DuckDB stops the statement and raises an error of its
own (an InterruptException, or, for a SIGINT in this release, a RuntimeError saying the query
was interrupted), which the command line reports as an interrupt, not as an internal error to
report. A real statement of an ingest, stopped by DuckDB's own interrupt."""

from __future__ import annotations

import threading
from pathlib import Path

import duckdb
import pytest
from support.paths import SAMPLE

import forensics.ingest.batched as batched
import forensics.ingest.load as load
from forensics.cli import run
from forensics.errors import interrupted

LONG = "SELECT count(*) FROM range(1000000000000) t(x) WHERE x % 7 = 3"


@pytest.mark.parametrize("where", ["_load_file", "_load_part"])
def test_a_statement_stopped_by_an_interrupt_is_reported_as_one(
    tmp_path: Path, capsys, monkeypatch, where: str
) -> None:  # type: ignore[no-untyped-def]
    """Stopped in a file's load, or inside the load of a Parquet part, whose DuckDB errors
    otherwise mean a damaged file."""
    ran: list[str] = []
    real = getattr(load, where)

    def long_load(con, f, *args, **kwargs):  # type: ignore[no-untyped-def]
        if f.fmt != "parquet":
            return real(con, f, *args, **kwargs)
        ran.append(f.rel)
        threading.Timer(0.3, con.interrupt).start()
        con.execute(LONG).fetchall()  # stopped by the interrupt
        raise AssertionError("not reached: the interrupt stops the statement")

    monkeypatch.setattr(load, where, long_load)
    monkeypatch.setattr(batched, "BATCHED_TABLES", frozenset())  # each part loaded alone
    db = tmp_path / "case.duckdb"
    capsys.readouterr()
    assert run(["ingest", str(SAMPLE), "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert len(ran) == 1
    assert "interrupted; nothing was changed" in err
    assert "internal error" not in err and "cannot read" not in err
    assert not db.exists()  # a first ingest that did not finish leaves no database


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (KeyboardInterrupt(), True),
        (duckdb.InterruptException("INTERRUPT Error: Interrupted!"), True),
        (RuntimeError("Query interrupted"), True),  # DuckDB's, for a SIGINT in a statement
        (RuntimeError("Query interrupted by a bug"), False),
        (ValueError("Query interrupted"), False),
        (duckdb.IOException("No magic bytes"), False),
    ],
)
def test_what_counts_as_an_interrupt(exc: BaseException, expected: bool) -> None:
    assert interrupted(exc) is expected
