"""Columns between Python, numpy and Arrow without pyarrow's conversion functions.

`pa.array(...)`, `Table.from_pylist` and `Array.to_numpy()` import pandas on their first use
wherever pandas is installed: about 0.4 to 0.6 s of a run's fixed cost, paid by every analysis
and ingest in a process of its own. The columns kvforensics builds are integers, floats,
booleans, text and microsecond timestamps, which are simple to lay out as Arrow buffers; any
other type goes through pyarrow's own conversion."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pyarrow as pa

# The numpy type of each number column (pyarrow's to_pandas_dtype imported pandas before 16).
_NUMPY: dict[pa.DataType, np.dtype] = {
    pa.int8(): np.dtype(np.int8),
    pa.int16(): np.dtype(np.int16),
    pa.int32(): np.dtype(np.int32),
    pa.int64(): np.dtype(np.int64),
    pa.float64(): np.dtype(np.float64),
}
_INTEGERS = {kind for kind, dtype in _NUMPY.items() if dtype.kind == "i"}
_BOUNDS: dict[np.dtype, tuple[int, int]] = {
    dtype: (int(np.iinfo(dtype).min), int(np.iinfo(dtype).max))
    for dtype in _NUMPY.values()
    if dtype.kind == "i"
}

# The largest text column that fits pa.string()'s 32-bit offsets; a larger one goes through
# pyarrow, which splits it into chunks.
_MAX_TEXT_BYTES = (1 << 31) - 1

_EPOCH = datetime(1970, 1, 1)
_EPOCH_UTC = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def as_numpy(column: pa.Array) -> np.ndarray:
    """An integer column without nulls as a numpy view of its buffer; anything else through
    pyarrow's own conversion."""
    if column.type in _INTEGERS and column.null_count == 0:
        dtype = np.dtype(f"int{column.type.bit_width}")
        return np.frombuffer(
            column.buffers()[1], dtype, count=len(column), offset=column.offset * dtype.itemsize
        )
    return column.to_numpy(zero_copy_only=False)


def whole_numpy(column: pa.ChunkedArray) -> np.ndarray:
    """A table's column as one numpy array (as_numpy of each chunk, joined). Not through
    ChunkedArray.combine_chunks, which imports pandas on a column of no chunks: the result of a
    query that found no rows."""
    parts = [as_numpy(chunk) for chunk in column.chunks]
    if not parts:
        kind = column.type
        return np.empty(0, _NUMPY[kind] if kind in _NUMPY else np.dtype(kind.to_pandas_dtype()))
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def from_numpy(values: np.ndarray) -> pa.Array:
    """A 1-D signed integer array as an Arrow array without nulls (copied when strided)."""
    if values.ndim != 1 or values.dtype.kind != "i":
        raise TypeError(f"expected a 1-D signed integer array, got {values.dtype} {values.shape}")
    values = np.ascontiguousarray(values)
    kind = pa.from_numpy_dtype(values.dtype)
    return pa.Array.from_buffers(kind, len(values), [None, pa.py_buffer(values)])


# The most bytes of text a column with 32-bit offsets can hold.
TEXT_BYTES_32 = np.iinfo(np.int32).max


def repeated(text: str, n: int) -> pa.Array:
    """A string column holding `text` n times, laid out directly (a dictionary column would
    need pyarrow.compute, a tenth of a second to import, to become plain text). Its offsets
    are 64-bit (large_string) where the text would pass 32-bit ones."""
    data = text.encode()
    wide = n * len(data) > TEXT_BYTES_32
    offsets = (np.arange(n + 1, dtype=np.int64) * len(data)).astype(
        np.int64 if wide else np.int32, copy=False
    )
    kind = pa.large_string() if wide else pa.string()
    return pa.Array.from_buffers(kind, n, [None, pa.py_buffer(offsets), pa.py_buffer(data * n)])


def table_of(rows: Sequence[Mapping[str, Any]], schema: pa.Schema) -> pa.Table:
    """Rows (mappings by column name; a name a row lacks is null) as a table of `schema`."""
    return columns_table({f.name: [row.get(f.name) for row in rows] for f in schema}, schema)


def columns_table(columns: Mapping[str, Sequence[Any]], schema: pa.Schema) -> pa.Table:
    """Python columns (a sequence of values per name of `schema`) as a table of `schema`."""
    arrays = [column_of(columns[f.name], f.type) for f in schema]
    return pa.Table.from_arrays(arrays, schema=schema)


def column_of(values: Sequence[Any], kind: pa.DataType) -> pa.Array:
    """Python values (None for null) as an Arrow array of `kind`. A value of the wrong type
    raises TypeError, one out of range OverflowError, as pyarrow's conversion would refuse it."""
    values = list(values)
    valid = np.fromiter((v is not None for v in values), bool, len(values))
    nulls = len(values) - int(valid.sum())
    bitmap = pa.py_buffer(np.packbits(valid, bitorder="little")) if nulls else None
    if kind in _NUMPY:
        dtype = _NUMPY[kind]
        data = np.array([_number(v, dtype) for v in values], dtype)
        return pa.Array.from_buffers(kind, len(values), [bitmap, pa.py_buffer(data)], nulls)
    if kind == pa.bool_():
        truth = np.array([_boolean(v) for v in values], bool)
        data = pa.py_buffer(np.packbits(truth, bitorder="little"))
        return pa.Array.from_buffers(kind, len(values), [bitmap, data], nulls)
    if kind == pa.string():
        encoded = [_text(v) for v in values]
        lengths = np.fromiter(map(len, encoded), np.int64, len(encoded))
        if int(lengths.sum()) <= _MAX_TEXT_BYTES:
            offsets = np.zeros(len(values) + 1, np.int32)
            np.cumsum(lengths, out=offsets[1:], dtype=np.int32)
            buffers = [bitmap, pa.py_buffer(offsets), pa.py_buffer(b"".join(encoded))]
            return pa.Array.from_buffers(kind, len(values), buffers, nulls)
    if pa.types.is_timestamp(kind) and kind.unit == "us":
        data = np.array([_microseconds(v) for v in values], np.int64)
        return pa.Array.from_buffers(kind, len(values), [bitmap, pa.py_buffer(data)], nulls)
    return pa.array(values, kind)


def _number(v: Any, dtype: np.dtype) -> Any:
    if v is None:
        return 0
    if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
        raise TypeError(f"expected a number for a {dtype} column, got {type(v).__name__}: {v!r}")
    if dtype.kind != "i":
        return v
    if not isinstance(v, (int, np.integer)) and not float(v).is_integer():
        # as pyarrow: a whole float is taken, a fraction is not
        raise TypeError(f"expected an integer for a {dtype} column, got {v!r}")
    whole = int(v)
    low, high = _BOUNDS[dtype]
    if not low <= whole <= high:  # numpy before 2.0 would wrap it round without a word
        raise OverflowError(f"{v!r} is out of range for a {dtype} column")
    return whole


def _boolean(v: Any) -> bool:
    if v is None:
        return False
    if not isinstance(v, (bool, np.bool_)):
        raise TypeError(f"expected a boolean, got {type(v).__name__}: {v!r}")
    return bool(v)


def _text(v: Any) -> bytes:
    if v is None:
        return b""
    if not isinstance(v, str):
        raise TypeError(f"expected text, got {type(v).__name__}: {v!r}")
    return v.encode()


def _microseconds(v: Any) -> int:
    """A datetime as microseconds since the epoch: its own time for a naive one, UTC for an
    aware one (as pyarrow stores both); an integer is taken as microseconds already."""
    if v is None:
        return 0
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
        return int(v)
    if not isinstance(v, datetime):
        raise TypeError(f"expected a datetime, got {type(v).__name__}: {v!r}")
    epoch = _EPOCH if v.tzinfo is None or v.utcoffset() is None else _EPOCH_UTC
    return (v - epoch) // _MICROSECOND
