"""The command line loads what the command it runs needs: `kvforensics --help`, `ingest` and
`report` do not load the analysis' compiled sweep (numba, about a second)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from support.paths import REPO, SAMPLE

HEAVY = ("numba", "forensics.analysis.stage", "forensics.run.pipeline", "torch")


def _loaded_after(argv: list[str], cwd: Path) -> list[str]:
    code = (
        "import json, sys\n"
        "from forensics.cli import run\n"
        f"code = run({argv!r})\n"
        f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))\n"
        "sys.exit(0 if code in (0, 1) else code)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_help_loads_no_stage() -> None:
    assert _loaded_after(["--help"], REPO) == []


def test_ingest_loads_no_compiled_sweep(tmp_path) -> None:
    db = tmp_path / "case.duckdb"
    case = str(SAMPLE)
    assert _loaded_after(["ingest", case, "--db", str(db)], tmp_path) == []
    assert _loaded_after(["ingest", case, "--db", str(db)], tmp_path) == []  # unchanged: skipped


def test_report_loads_no_compiled_sweep(tmp_path) -> None:
    db = tmp_path / "case.duckdb"
    case = str(SAMPLE)
    _loaded_after(["ingest", case, "--db", str(db)], tmp_path)
    assert "numba" in _loaded_after(["analyze", "--db", str(db)], tmp_path)  # it sweeps
    assert (
        _loaded_after(["report", "--db", str(db), "--out", str(tmp_path / "out")], tmp_path) == []
    )
