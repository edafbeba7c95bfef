"""The gate is one command: pytest also runs the linter and the type checker."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
from support.paths import REPO


def test_ruff_is_clean():
    proc = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "forensics", "tests", "benchmarks", "scripts"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_ruff_format_is_clean():
    """The code has one layout: `ruff format` leaves every file as it is."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "ruff",
            "format",
            "--check",
            "forensics",
            "tests",
            "benchmarks",
            "scripts",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_mypy_is_clean():
    if shutil.which("mypy") is None and not _has_module("mypy"):
        pytest.skip("mypy not installed")
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "forensics"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _has_module(name: str) -> bool:
    from importlib.util import find_spec

    return find_spec(name) is not None


@pytest.mark.parametrize("script", sorted(p.name for p in (REPO / "benchmarks").glob("*.py")))
def test_benchmark_scripts_import(script):
    """The benchmark scripts are not run by the suite; at least every name they import exists."""
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            f"import runpy; runpy.run_path('benchmarks/{script}', run_name='imported')",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
