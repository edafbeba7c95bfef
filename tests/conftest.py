"""Shared test helpers: write small case folders, run the CLI, query a case database."""

from __future__ import annotations

import gzip
import io
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest
import zstandard

from forensics.cli import run

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "tests" / "data" / "examples"  # the worked examples of docs/DESIGN.md §4


def compress(data: bytes, compression: str | None) -> bytes:
    if compression == "gzip":
        return gzip.compress(data, mtime=0)
    if compression == "zstd":
        return zstandard.ZstdCompressor().compress(data)
    return data


def write_file(path: Path, text: str | bytes, compression: str | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = text.encode("utf-8") if isinstance(text, str) else text
    path.write_bytes(compress(data, compression))
    return path


@pytest.fixture
def case(tmp_path: Path) -> Callable[[dict[str, str | bytes]], Path]:
    """case({'requests.csv': '...', 'kv_events/part-1.jsonl': '...'}) -> the case folder."""

    def make(files: dict[str, str | bytes]) -> Path:
        root = tmp_path / "case"
        for rel, text in files.items():
            compression = {"gz": "gzip", "zst": "zstd"}.get(rel.rsplit(".", 1)[-1])
            write_file(root / rel, text, compression)
        return root

    return make


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Callable[..., tuple[int, str, str]]:
    """cli('ingest', case, '--db', db) -> (exit code, stdout, stderr)."""

    def invoke(*args: Any) -> tuple[int, str, str]:
        code = run([str(a) for a in args])
        out, err = capsys.readouterr()
        return code, out, err

    return invoke


def query(db: Path, text: str, params: dict[str, Any] | None = None) -> list[tuple[Any, ...]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(text, params or {}).fetchall()
    finally:
        con.close()


def parquet_bytes(rows: list[dict[str, Any]]) -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq

    sink = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows), sink)
    return sink.getvalue()


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
