"""Progress of long work: a live display on a terminal; when stderr is not a terminal (piped,
redirected to a log), one plain line per stage as it starts, with the time since the start."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

import duckdb
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from forensics.base.progress import ProgressFn
from forensics.base.textsafe import visible
from forensics.db import connect, ingested
from forensics.errors import CaseError

T = TypeVar("T")


@contextmanager
def progress_reporter(console: Console, title: str) -> Iterator[ProgressFn]:
    if not console.is_terminal:
        yield _stage_lines(console, title)
        return
    columns = (SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=True) as bar:
        task = bar.add_task(title, total=None)

        def update(description: str, done: int, total: int | None) -> None:
            shown = escape(visible(description, keep_newlines=False))  # names from the case
            bar.update(task, description=f"{title}: {shown}", completed=done, total=total)

        yield update


def _stage_lines(console: Console, title: str) -> ProgressFn:
    """A line such as `investigate: analyze (12.3 s)` for each stage (a report with no total);
    counted steps inside a stage print nothing, so a log stays short."""
    started = time.monotonic()

    def line(description: str, _done: int, total: int | None) -> None:
        if total is None:
            shown = visible(description, keep_newlines=False)  # names from the case
            console.print(
                f"{title}: {shown} ({time.monotonic() - started:.1f} s)",
                markup=False,
                highlight=False,
            )
            console.file.flush()

    return line


def run_on_case(
    console: Console,
    db: Path,
    title: str,
    work: Callable[[duckdb.DuckDBPyConnection, ProgressFn], T],
) -> T:
    """Open an existing case database, run `work` on it with progress shown as `title`, close."""
    if not db.is_file():
        raise CaseError(
            f"no case database at {db}; create it with `kvforensics ingest CASE --db {db}`"
        )
    con = connect(db)
    try:
        if not ingested(con):
            raise CaseError(
                f"{db} holds no ingested case (an ingest into it failed or was stopped); "
                f"ingest the case again with `kvforensics ingest CASE --db {db}`"
            )
        with progress_reporter(console, title) as progress:
            return work(con, progress)
    finally:
        con.close()
