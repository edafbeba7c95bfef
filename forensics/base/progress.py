"""Progress callbacks: library code reports, the CLI decides how to show it."""

from __future__ import annotations

from collections.abc import Callable

# progress(description, done, total): total None means "unknown"
ProgressFn = Callable[[str, int, int | None], None]


def no_progress(description: str, done: int, total: int | None) -> None:
    """The default for library calls: report nothing."""
