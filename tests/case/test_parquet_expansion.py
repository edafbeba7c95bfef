"""A small Parquet file that expands (a 40 KB string dictionary-encoded in each of 100,000
rows: under 1 MB on disk, 4 GB decoded) is refused before it is read, with its figures, its
name and the fix (exit 2), and measuring it takes a few megabytes, never the gigabytes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from forensics.case.expansion import EXPANSION_MOST, check_expansion, measure

ROWS = 100_000
VALUE = 40_000


def _requests(path: Path, account: pa.Array) -> Path:
    n = len(account)
    pq.write_table(
        pa.table(
            {
                "request_id": pa.array([f"r{i}" for i in range(n)]),
                "account_id": account,
                "model": pa.array(["m"] * n),
                "received_at": pa.array(["2026-08-27T10:00:00Z"] * n),
                "http_status": pa.array([200] * n, pa.int64()),
                "prompt_tokens": pa.array([1] * n, pa.int64()),
            }
        ),
        path,
    )
    return path


@pytest.fixture(scope="module")
def bomb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    case = tmp_path_factory.mktemp("bomb") / "case"
    case.mkdir()
    # written from the dictionary and its indices: the 4 GB of values never exist
    long = pa.DictionaryArray.from_arrays(pa.array([0] * ROWS, pa.int32()), pa.array(["x" * VALUE]))
    _requests(case / "requests.parquet", long)
    return case


def test_the_decoded_size_is_measured_without_decoding(bomb: Path) -> None:
    pool = pa.default_memory_pool()
    before = pool.bytes_allocated()
    found = measure(bomb / "requests.parquet")
    assert found.on_disk < 1_000_000
    assert ROWS * VALUE <= found.decoded < ROWS * VALUE + 10_000_000
    assert pool.max_memory() - before < 64 << 20  # indices and lengths, not the values


def test_an_expanding_file_is_refused_with_its_figures(
    bomb: Path, tmp_path: Path, cli: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KVFORENSICS_MEMORY_LIMIT", "1GB")
    db = tmp_path / "c.duckdb"
    code, out, err = cli("ingest", bomb, "--db", db)
    flat = " ".join((out + err).split())
    assert code == 2, flat
    assert "requests.parquet" in flat and "decodes to 4,00" in flat
    assert "more than the memory limit of 1,000,000,000 bytes" in flat
    assert "raise KVFORENSICS_MEMORY_LIMIT above 4,00" in flat and "internal error" not in flat
    assert not db.exists()


def test_real_data_larger_than_the_limit_is_read(tmp_path: Path) -> None:
    """Parquet's own compression of varied values stays far below the ratio refused: a file
    decoding to more than the memory limit is still read when it does not expand."""
    path = _requests(tmp_path / "r.parquet", pa.array([f"acct-{i % 997}" for i in range(50_000)]))
    found = measure(path)
    assert 1 < found.ratio < EXPANSION_MOST
    check_expansion("r.parquet", path, found.decoded // 2)  # over the limit, no expansion
    check_expansion("r.parquet", path, 0)  # no limit known: nothing to compare with


def test_an_expanding_part_of_an_external_ledger_is_refused(
    tmp_path: Path, cli: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ledger read in place (--ledger-external) is held to the same rule, part by part, before
    its check reads it."""
    case = tmp_path / "case"
    folder = case / "kv_events" / "node=d1"
    folder.mkdir(parents=True)
    _requests(case / "requests.parquet", pa.array(["acct-1"] * 3))
    source = pa.DictionaryArray.from_arrays(
        pa.array([0] * ROWS, pa.int32()), pa.array(["x" * VALUE])
    )
    pq.write_table(
        pa.table(
            {
                "ts": pa.array(["2026-08-27T10:00:00Z"] * ROWS),
                "node": pa.array(["d1"] * ROWS),
                "request_id": pa.array(["r0"] * ROWS),
                "op": pa.array(["write"] * ROWS),
                "slot_start": pa.array([0] * ROWS, pa.int64()),
                "slot_count": pa.array([1] * ROWS, pa.int64()),
                "pos_start": pa.array([0] * ROWS, pa.int64()),
                "source": source,
            }
        ),
        folder / "d1-part-00001.parquet",
    )
    monkeypatch.setenv("KVFORENSICS_MEMORY_LIMIT", "1GB")
    db = tmp_path / "c.duckdb"
    code, out, err = cli("ingest", case, "--db", db, "--ledger-external")
    flat = " ".join((out + err).split())
    assert code == 2, flat
    assert "d1-part-00001.parquet" in flat and "decodes to 4,00" in flat
    assert "internal error" not in flat
