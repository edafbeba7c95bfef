"""Small case folders written file by file, and case databases queried read-only."""

from __future__ import annotations

import gzip
import io
from pathlib import Path
from typing import Any

import duckdb
import zstandard


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


def write_case(root: Path, files: dict[str, str | bytes]) -> Path:
    """The case folder `root` holding `files` (relative path -> text or bytes); a name ending
    in .gz or .zst is written compressed that way."""
    for rel, text in files.items():
        compression = {"gz": "gzip", "zst": "zstd"}.get(rel.rsplit(".", 1)[-1])
        write_file(root / rel, text, compression)
    return root


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
