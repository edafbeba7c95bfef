"""Numpy arrays to Arrow and back without pyarrow's conversion functions.

`pa.array(...)` and `Array.to_numpy()` import pandas on their first use wherever pandas is
installed, about 0.6 s of a run's fixed cost; the analysis only moves integer columns without
nulls, which need no conversion at all: a view of the buffer either way."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

_INTEGERS = {pa.int8(), pa.int16(), pa.int32(), pa.int64()}


def as_numpy(column: pa.Array) -> np.ndarray:
    """An integer column without nulls as a numpy view of its buffer; anything else through
    pyarrow's own conversion."""
    if column.type in _INTEGERS and column.null_count == 0:
        dtype = np.dtype(f"int{column.type.bit_width}")
        return np.frombuffer(
            column.buffers()[1], dtype, count=len(column), offset=column.offset * dtype.itemsize
        )
    return column.to_numpy(zero_copy_only=False)


def from_numpy(values: np.ndarray) -> pa.Array:
    """A 1-D signed integer array as an Arrow array without nulls (copied when strided)."""
    if values.ndim != 1 or values.dtype.kind != "i":
        raise TypeError(f"expected a 1-D signed integer array, got {values.dtype} {values.shape}")
    values = np.ascontiguousarray(values)
    kind = pa.from_numpy_dtype(values.dtype)
    return pa.Array.from_buffers(kind, len(values), [None, pa.py_buffer(values)])


def repeated(text: str, n: int) -> pa.Array:
    """A string column holding `text` n times (dictionary-encoded, one copy of the text)."""
    data = text.encode()
    offsets = np.array([0, len(data)], np.int32)
    words = pa.Array.from_buffers(pa.string(), 1, [None, pa.py_buffer(offsets), pa.py_buffer(data)])
    return pa.DictionaryArray.from_arrays(from_numpy(np.zeros(n, np.int32)), words)
