"""A real disk of its own with little room, for the tests of a disk that fills: a tmpfs
mounted for the test where this user may mount one (root); the test is skipped elsewhere."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def small_disk(folder: Path, size: int) -> Iterator[Path]:
    """A tmpfs of `size` bytes mounted at folder (made here), unmounted on leaving."""
    folder.mkdir()
    try:
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except OSError as exc:
        pytest.skip(f"cannot mount a small disk here: {exc}")
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small disk here: {done.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], capture_output=True, timeout=30)
