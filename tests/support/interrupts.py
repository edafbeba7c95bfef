"""Waits that a test interrupts."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any


def watching(
    waited: Callable[[Iterable[Any]], Iterator[Any]], interrupted: threading.Event
) -> Callable[[Iterable[Any]], Iterator[Any]]:
    """as_completed (`waited`) that sets `interrupted` when Ctrl-C (or any error) stops the
    wait, so that the tasks a test holds at work may end then."""

    def watched(tasks: Iterable[Any]) -> Iterator[Any]:
        try:
            yield from waited(tasks)
        except BaseException:
            interrupted.set()
            raise

    return watched
