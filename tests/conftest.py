"""Shared fixtures: write small case folders, run the CLI, the spoiled hive sample. Plain helpers
live in tests/support/."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.cases import write_case
from support.oldduckdb import old_duckdb_python
from support.samples import edit_part, hive_sample, split_in_two
from support.vllm_serve import vllm_engine

from forensics.cli import run


@pytest.fixture
def case(tmp_path: Path) -> Callable[[dict[str, str | bytes]], Path]:
    """case({'requests.csv': '...', 'kv_events/part-1.jsonl': '...'}) -> the case folder."""

    def make(files: dict[str, str | bytes]) -> Path:
        return write_case(tmp_path / "case", files)

    return make


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Callable[..., tuple[int, str, str]]:
    """cli('ingest', case, '--db', db) -> (exit code, stdout, stderr)."""

    def invoke(*args: Any) -> tuple[int, str, str]:
        code = run([str(a) for a in args])
        out, err = capsys.readouterr()
        return code, out, err

    return invoke


@pytest.fixture(scope="module")
def spoiled(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The hive sample with decode-0's ledger in two parts and one bad slot_count, and its
    loaded-and-analysed case database."""
    case = hive_sample(tmp_path_factory.mktemp("ext"))
    split_in_two(case, "decode-0")
    edit_part(next((case / "kv_events" / "node=decode-1").glob("*.parquet")), 4, "slot_count", 0)
    db = case.parent / "loaded.duckdb"
    assert run(["ingest", str(case), "--db", str(db), "--ledger-load"]) == 1
    assert run(["analyze", "--db", str(db)]) == 1
    return case, db


@pytest.fixture(scope="module")
def old_python(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A python whose duckdb is the old release (made once, kept in pytest's cache)."""
    cache = getattr(request.config, "cache", None)  # absent under -p no:cacheprovider
    if cache is None:
        return old_duckdb_python(tmp_path_factory.mktemp("duckdb-1.1-venv"))
    return old_duckdb_python(Path(cache.mkdir("duckdb-1.1-venv")))


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A real vLLM's environment and its tiny model's folder (support.vllm_serve)."""
    return vllm_engine(tmp_path_factory.mktemp("model") / "tiny-llama")
