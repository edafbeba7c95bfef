"""Integer columns between numpy and Arrow without pyarrow's conversions
(forensics.analysis.arrow), checked against pyarrow's own Python lists; and the analysis of a
case in a fresh process, which must not load pandas (0.6 s of its fixed cost)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from conftest import REPO

from forensics.analysis.arrow import as_numpy, from_numpy, repeated

SAMPLE = REPO / "data_samples" / "incident"


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


def test_only_integer_vectors_are_taken() -> None:
    with pytest.raises(TypeError):
        from_numpy(np.array([1.5]))
    with pytest.raises(TypeError):
        from_numpy(np.zeros((2, 2), np.int64))


@pytest.mark.parametrize("text", ["decode-0", "", "nœud é 節点 \x00 <b>\"'", "x" * 5000])
def test_a_repeated_text_is_that_text_each_time(text: str) -> None:
    column = repeated(text, 4)
    assert column.to_pylist() == [text] * 4
    assert column.cast(pa.string()).to_pylist() == [text] * 4
    assert repeated(text, 0).to_pylist() == []


@pytest.mark.skipif(importlib.util.find_spec("pandas") is None, reason="pandas is not installed")
def test_the_analysis_runs_without_loading_pandas(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    db = tmp_path / "case.duckdb"
    code, _, err = cli("ingest", SAMPLE, "--db", db)
    assert code == 0, err
    script = (
        "import sys\n"
        "from forensics.db import connect\n"
        "from forensics.analysis.stage import analyze\n"
        f"con = connect({str(db)!r})\n"
        "out = analyze(con)\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] == 'pandas')\n"
        "print(out['exposure_runs'], loaded)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr
    runs, modules = done.stdout.split(" ", 1)
    assert int(runs) > 0  # the sample's exposures were found
    assert modules.strip() == "[]"
