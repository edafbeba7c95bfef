"""Columns between Python, numpy and Arrow without pyarrow's conversions (forensics.base.arrow),
checked against pyarrow's own conversions; and an analysis and an ingest of a case, each in a
fresh process, which must not load pandas (0.4 to 0.6 s of their fixed cost)."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from support.paths import REPO, SAMPLE
from support.samples import hive_sample

import forensics.base.arrow
from forensics.base.arrow import (
    as_numpy,
    column_of,
    columns_table,
    from_numpy,
    repeated,
    table_of,
    whole_numpy,
)


@pytest.mark.parametrize("kind", [pa.int8(), pa.int16(), pa.int32(), pa.int64()])
def test_a_column_with_an_offset_reads_as_its_values(kind: pa.DataType) -> None:
    values = [(-1) ** i * (i * 37 % 120) for i in range(50)]
    column = pa.array(values, kind).slice(7, 30)
    got = as_numpy(column)
    assert got.dtype == np.dtype(kind.to_pandas_dtype())
    assert got.tolist() == column.to_pylist()


def test_a_column_with_nulls_goes_through_pyarrow() -> None:
    got = as_numpy(pa.array([4, None, 6], pa.int64()))
    assert got[0] == 4 and np.isnan(got[1]) and got[2] == 6


def test_each_column_of_a_two_dimensional_array_becomes_its_own_values() -> None:
    rows = np.arange(-12, 12, dtype=np.int64).reshape(8, 3) * 1_000_000_007
    for i in range(3):
        column = from_numpy(rows[:, i])  # strided: copied
        assert column.type == pa.int64()
        assert column.to_pylist() == [int(v) for v in rows[:, i]]
    assert from_numpy(np.array([1, -2], np.int32)).type == pa.int32()


@pytest.mark.parametrize("chunks", [0, 1, 3])
def test_a_table_column_is_its_chunks_values_in_order(chunks: int) -> None:
    values = [np.arange(i * 10, i * 10 + i + 2, dtype=np.int32) for i in range(chunks)]
    column = pa.chunked_array([from_numpy(v) for v in values], type=pa.int32())
    got = whole_numpy(column)
    assert got.dtype == np.int32
    assert got.tolist() == [int(x) for v in values for x in v]


def test_only_integer_vectors_are_taken() -> None:
    with pytest.raises(TypeError):
        from_numpy(np.array([1.5]))
    with pytest.raises(TypeError):
        from_numpy(np.zeros((2, 2), np.int64))


@pytest.mark.parametrize("text", ["decode-0", "", "nœud é 節点 \x00 <b>\"'", "x" * 5000])
def test_a_repeated_text_is_that_text_each_time(text: str) -> None:
    column = repeated(text, 4)
    assert column.type == pa.string()
    column.validate(full=True)
    assert column.to_pylist() == [text] * 4
    assert repeated(text, 0).to_pylist() == []


def test_a_repeated_text_past_32_bit_offsets_is_large_text(monkeypatch: Any) -> None:
    """A column whose text passes what 32-bit offsets reach has 64-bit ones (the limit lowered
    here from 2 GiB, so as not to make 2 GiB of text)."""
    monkeypatch.setattr(forensics.base.arrow, "TEXT_BYTES_32", 20)
    assert repeated("abcd", 5).type == pa.string()  # 20 bytes: within
    column = repeated("abcd", 6)
    assert column.type == pa.large_string()
    column.validate(full=True)
    assert column.to_pylist() == ["abcd"] * 6


def test_stored_findings_need_no_pyarrow_compute() -> None:
    """Storing a node's findings lays out its text columns directly: importing pyarrow.compute
    costs the analysis a tenth of a second on its critical path."""
    code = (
        "import sys, numpy as np\n"
        "from forensics.analysis.runfacts import ExposureRuns, runs_table\n"
        "runs = ExposureRuns(*(np.zeros(2, np.int64) for _ in ExposureRuns._fields))\n"
        "t = runs_table('decode-0', runs)\n"
        "assert t.column('node').to_pylist() == ['decode-0'] * 2\n"
        "assert 'pyarrow.compute' not in sys.modules, 'pyarrow.compute was imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


HOSTILE_TEXT = [
    "decode-0",
    "",
    None,
    "nœud é 節点 \x00 <b>\"'",
    '=HYPERLINK("http://x")\u202e\t',
    "\u3000padded\u3000",
    "😀" * 3,
    "x" * 70_000,
]
TIMES = [
    datetime(2026, 8, 27, 0, 0, 0, 227_666),
    None,
    datetime(1969, 12, 31, 23, 59, 59, 999_999),
    datetime(1900, 1, 1),
    datetime(9999, 12, 31, 23, 59, 59, 999_999),
    datetime(2026, 8, 27, 9, 0, tzinfo=timezone(timedelta(hours=9))),
    datetime(2026, 8, 27, 0, 0, tzinfo=timezone(timedelta(hours=-3, minutes=-30))),
    datetime(2026, 8, 27, tzinfo=UTC),
    1_787_788_800_000_001,
    -1,
]
COLUMNS: list[tuple[pa.DataType, list[Any]]] = [
    (pa.int64(), [0, None, -(2**63), 2**63 - 1, 7, np.int64(-5), None, 16.0]),
    (pa.int32(), [2**31 - 1, -(2**31), None, 0]),
    (pa.int16(), [None, None, 12]),
    (pa.int8(), [127, -128, None]),
    (pa.float64(), [0.5, None, -0.0, 1e308, 3, float("inf")]),
    (pa.bool_(), [True, False, None, True, True, False, False, True, False, None]),
    (pa.string(), HOSTILE_TEXT),
    (pa.timestamp("us"), TIMES),
    (pa.timestamp("us", tz="UTC"), TIMES),
]


@pytest.mark.parametrize(("kind", "values"), COLUMNS, ids=lambda c: str(c)[:20])
def test_a_python_column_is_what_pyarrow_makes_of_it(kind: pa.DataType, values: list[Any]) -> None:
    for n in (len(values), 1, 0):  # whole, one value, none
        got = column_of(values[:n], kind)
        want = pa.array(values[:n], kind)
        assert got.type == want.type
        assert got.null_count == want.null_count
        assert got.equals(want), (got, want)
        got.validate(full=True)


def test_more_rows_than_a_byte_of_validity_keep_their_nulls_in_place() -> None:
    values = [None if i % 3 == 0 or i in (8, 9, 63, 64) else i for i in range(131)]
    for kind in (pa.int64(), pa.string(), pa.bool_(), pa.timestamp("us")):
        cast = [
            None
            if v is None
            else {
                pa.string(): str(v),
                pa.bool_(): v % 2 == 1,
                pa.timestamp("us"): datetime(2026, 1, 1) + timedelta(seconds=v),
            }.get(kind, v)
            for v in values
        ]
        assert column_of(cast, kind).equals(pa.array(cast, kind))


def test_rows_become_the_table_pyarrow_makes_of_them_a_missing_key_null() -> None:
    schema = pa.schema([(f"c{i}", kind) for i, (kind, _) in enumerate(COLUMNS)])
    width = max(len(values) for _, values in COLUMNS)
    rows = [
        {f"c{i}": values[r] for i, (_, values) in enumerate(COLUMNS) if r < len(values)}
        for r in range(width)
    ]
    got = table_of(rows, schema)
    assert got.schema == schema
    assert got.equals(pa.Table.from_pylist(rows, schema))
    columns = {name: got.column(name).to_pylist() for name in schema.names}
    assert columns_table(columns, schema).equals(got)
    assert table_of([], schema).equals(schema.empty_table())


@pytest.mark.parametrize(
    ("kind", "value", "error"),
    [
        (pa.int64(), "7", TypeError),
        (pa.int64(), 1.5, TypeError),
        (pa.int64(), True, TypeError),
        (pa.int64(), 2**63, OverflowError),
        (pa.int32(), 2**31, OverflowError),
        (pa.int8(), -129, OverflowError),
        (pa.float64(), "0.5", TypeError),
        (pa.bool_(), 1, TypeError),
        (pa.string(), 7, TypeError),
        (pa.string(), b"bytes", TypeError),
        (pa.string(), "\ud800", UnicodeEncodeError),
        (pa.timestamp("us"), "2026-01-01", TypeError),
    ],
)
def test_a_value_of_another_type_or_out_of_range_is_refused(
    kind: pa.DataType, value: Any, error: type[Exception]
) -> None:
    with pytest.raises(error):
        column_of([None, value], kind)


def test_another_type_goes_through_pyarrow() -> None:
    values = [[1, 2], None, []]
    assert column_of(values, pa.list_(pa.int64())).equals(pa.array(values, pa.list_(pa.int64())))


WITHOUT_PANDAS = pytest.mark.skipif(
    importlib.util.find_spec("pandas") is None, reason="pandas is not installed"
)


def in_fresh_process(statements: str) -> tuple[int, str]:
    """Run statements (which leave a count in `n`) in a fresh interpreter: n, and the pandas
    modules loaded by then."""
    script = (
        f"import sys\n{statements}\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] == 'pandas')\n"
        "print(n, loaded)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr
    n, modules = done.stdout.split(" ", 1)
    return int(n), modules.strip()


@WITHOUT_PANDAS
@pytest.mark.parametrize("external", [False, True], ids=["loaded", "external"])
def test_the_analysis_runs_without_loading_pandas(tmp_path: Path, cli, external: bool) -> None:  # type: ignore[no-untyped-def]
    db = tmp_path / "case.duckdb"
    case = hive_sample(tmp_path) if external else SAMPLE
    more = ["--ledger-external"] if external else []
    code, _, err = cli("ingest", case, "--db", db, *more)
    assert code == 0, err
    runs, modules = in_fresh_process(
        "from forensics.db import connect\n"
        "from forensics.analysis.stage import analyze\n"
        f"n = analyze(connect({str(db)!r}))['exposure_runs']"
    )
    assert runs > 0  # the sample's exposures were found
    assert modules == "[]"


@WITHOUT_PANDAS
@pytest.mark.parametrize("external", [False, True], ids=["loaded", "external"])
def test_an_ingest_runs_without_loading_pandas(tmp_path: Path, external: bool) -> None:
    case = hive_sample(tmp_path) if external else tmp_path / "case"
    if not external:
        shutil.copytree(SAMPLE, case)
    ledger = "kv_events" if external else None
    rows, modules = in_fresh_process(
        "from forensics.bench.stages import ingest\n"
        f"n = ingest({str(case)!r}, {str(tmp_path / 'case.duckdb')!r}, None, {ledger!r})"
        "['rows_loaded']"
    )
    assert rows > 100_000  # the sample's ledger and logs were read
    assert modules == "[]"
