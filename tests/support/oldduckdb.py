"""An older DuckDB release (OLD_DUCKDB, the oldest the storage format promises) in a virtual
environment of its own, for reading case databases with it."""

from __future__ import annotations

import subprocess
import sys
import venv
from pathlib import Path

import pytest

OLD_DUCKDB = "1.1.*"


def old_duckdb_python(cache_dir: Path) -> Path:
    """A virtual environment with duckdb OLD_DUCKDB, made once and kept in the pytest cache."""
    python = cache_dir / "bin" / "python"
    probe = [str(python), "-c", "import duckdb; print(duckdb.__version__)"]
    if python.exists() and subprocess.run(probe, capture_output=True).returncode == 0:
        return python
    venv.create(cache_dir, with_pip=False, clear=True)  # this pip installs into it (--python)
    done = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "-q"]
        + [f"duckdb=={OLD_DUCKDB}"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if done.returncode != 0:
        pytest.skip(
            f"cannot install duckdb=={OLD_DUCKDB} from the package index: "
            f"{done.stderr.strip()[-300:]}"
        )
    return python
