"""The fuzz harness on a few dozen damaged case folders: no traceback, every record counted.
The cases are chosen so that every kind of damage the harness knows occurs at least once (the
long run, `python benchmarks/fuzz_ingest.py --cases 1000`, stays a benchmark)."""

from __future__ import annotations

import re
import runpy
from pathlib import Path

from support.paths import REPO

CASES, SEED = 30, 18
KINDS = {  # each kind of damage, as the harness names its steps
    "truncate": r"^truncate ",
    "flip bytes": r"^flip ",
    "hostile CSV value": r"^hostile \S+\.csv ",
    "hostile JSON value": r"^hostile \S+\.jsonl ",
    "drop a column": r"^drop column ",
    "duplicate a column": r"^duplicate column ",
    "decompress": r"^compress \S+\.(csv|jsonl|parquet)$",
    "gzip": r"^compress \S+\.gz$",
    "zstd": r"^compress \S+\.zst$",
    "CSV to JSON Lines": r" to jsonl$",
    "CSV to Parquet": r" to parquet$",
    "JSON Lines to CSV": r" to csv$",
    "empty file": r"^empty ",
    "hidden file": r"^hidden beside ",
    "CRLF": r"^crlf ",
    "duplicate line": r"^duplicate line ",
    "stray quote": r"^stray quote ",
}


def _fuzz() -> dict:
    return runpy.run_path(str(REPO / "benchmarks" / "fuzz_ingest.py"), run_name="fuzz")


def test_fuzz_cases_cover_every_kind_of_damage(tmp_path: Path) -> None:
    damaged_case = _fuzz()["damaged_case"]
    steps = [s for n in range(CASES) for s in damaged_case(SEED, n, tmp_path / f"case-{n}")]
    missing = [k for k, rx in KINDS.items() if not any(re.search(rx, s) for s in steps)]
    assert not missing, (missing, steps)


def test_fuzz_ingest_finds_nothing(capsys) -> None:
    failures = _fuzz()["run_fuzz"](cases=CASES, seed=SEED, investigate_every=15, keep=None)
    out = capsys.readouterr().out
    assert failures == 0, out
    assert f"{CASES} cases" in out
