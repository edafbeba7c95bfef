"""A rich progress display for long work, silent when stderr is not a terminal."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from forensics.progress import ProgressFn, no_progress


@contextmanager
def progress_reporter(console: Console, title: str) -> Iterator[ProgressFn]:
    if not console.is_terminal:
        yield no_progress
        return
    columns = (SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=True) as bar:
        task = bar.add_task(title, total=None)

        def update(description: str, done: int, total: int | None) -> None:
            bar.update(task, description=f"{title}: {description}", completed=done, total=total)

        yield update
