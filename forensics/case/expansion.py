"""How large a Parquet file is once decoded, found without decoding it, so that a small file
that expands (a long string dictionary-encoded and repeated in every row: 100,000 rows of a
40 KB value take under 1 MB on disk and 4 GB decoded) is refused before it is read.

The footer's sizes do not show it: a dictionary-encoded column's pages hold the dictionary once
and an index per row. So each dictionary-encoded text column is measured from its dictionary
and its indices (pyarrow reads them without building the values: about 4 bytes a row, one row
group at a time), and every other column by the decompressed size of its pages."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from forensics.errors import InputError

if TYPE_CHECKING:
    import pyarrow as pa

# A file that decodes to more than the memory limit and to more than this many times its size
# on disk is refused: Parquet's own compression of real data stays far below it (3 to 20
# times), while a decoded size beyond the memory limit is read in streams and written whole
# into the case database, however few bytes the file holds.
EXPANSION_MOST = 100


@dataclass(frozen=True)
class Expansion:
    on_disk: int  # bytes of the file
    decoded: int  # bytes its values take decoded

    @property
    def ratio(self) -> float:
        return self.decoded / max(self.on_disk, 1)


def _dictionary_bytes(path: Path, group: int, names: list[str]) -> int:
    """Bytes of these dictionary-encoded text columns of one row group, decoded: the length of
    each row's dictionary entry, summed, without building the values."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pq.ParquetFile(path, read_dictionary=names).read_row_group(group, columns=names)
    total = 0
    for column in table.columns:
        for chunk in column.chunks:
            if not pa.types.is_dictionary(chunk.type):
                total += chunk.nbytes
                continue
            total += _entries_bytes(chunk)
    return total


def _entries_bytes(chunk: pa.DictionaryArray) -> int:
    """The summed length of each row's dictionary entry, from the dictionary's offsets and the
    indices in numpy (pyarrow.compute would load pandas, which ingest never does)."""
    import numpy as np
    import pyarrow as pa

    words = chunk.dictionary
    wide = words.type in (pa.large_string(), pa.large_binary())
    dtype = np.dtype(np.int64 if wide else np.int32)
    offsets = np.frombuffer(
        words.buffers()[1], dtype, count=len(words) + 1, offset=words.offset * dtype.itemsize
    ).astype(np.int64)
    lengths = np.diff(offsets)
    if len(chunk) == 0 or len(lengths) == 0:
        return 0
    indices = chunk.indices
    width = np.dtype(f"int{indices.type.bit_width}")
    codes = np.frombuffer(
        indices.buffers()[1], width, count=len(indices), offset=indices.offset * width.itemsize
    ).astype(np.int64)
    if indices.null_count:  # a null's code is any value: it takes no bytes
        valid = np.unpackbits(np.frombuffer(indices.buffers()[0], np.uint8), bitorder="little")[
            indices.offset : indices.offset + len(indices)
        ].astype(bool)
        codes = codes[valid]
    return int(lengths[np.clip(codes, 0, len(lengths) - 1)].sum())


@dataclass(frozen=True)
class Footer:
    """What the footer says: bytes of the columns' decompressed pages that are the values
    themselves, and each dictionary-encoded text column's (row group, name, rows, bytes)."""

    plain: int
    encoded: list[tuple[int, str, int, int]]

    def most(self) -> int:
        """Bytes the file can decode to at the most (an entry is no longer than its pages)."""
        return self.plain + sum(rows * size for _, _, rows, size in self.encoded)


def footer(path: Path) -> Footer:
    import pyarrow.parquet as pq

    meta = pq.ParquetFile(path).metadata
    plain, encoded = 0, []
    for group in range(meta.num_row_groups):
        row_group = meta.row_group(group)
        for i in range(row_group.num_columns):
            chunk = row_group.column(i)
            name = chunk.path_in_schema
            size = chunk.total_uncompressed_size
            if (
                chunk.physical_type == "BYTE_ARRAY"
                and chunk.has_dictionary_page
                and "." not in name
            ):
                encoded.append((group, name, chunk.num_values, size))
            else:
                plain += size
    return Footer(plain, encoded)


def measure(path: Path, found: Footer | None = None) -> Expansion:
    """The file's size on disk and its values' size decoded (every column)."""
    found = found or footer(path)
    decoded = found.plain
    for group in sorted({g for g, _, _, _ in found.encoded}):
        names = [name for g, name, _, _ in found.encoded if g == group]
        decoded += _dictionary_bytes(path, group, names)
    return Expansion(path.stat().st_size, decoded)


def check_expansion(rel: str, path: Path, memory_limit: int) -> None:
    """InputError (exit 2) naming the file, its figures and the fix when it decodes to more
    than memory_limit bytes and more than EXPANSION_MOST times its size."""
    if memory_limit <= 0:
        return
    pages = footer(path)
    if pages.most() <= memory_limit:  # the footer alone clears it (most files, small parts)
        return
    found = measure(path, pages)
    if found.decoded <= memory_limit or found.ratio <= EXPANSION_MOST:
        return
    raise InputError(
        f"this Parquet file of {found.on_disk:,} bytes decodes to {found.decoded:,} bytes "
        f"({found.ratio:,.0f} times its size: values repeated row after row, dictionary-encoded "
        f"or compressed), more than the memory limit of {memory_limit:,} bytes; it is not read",
        path=rel,
        fix="check where the file came from (a value repeated this much is not a request log or "
        "a ledger); if it is genuine, raise KVFORENSICS_MEMORY_LIMIT above "
        f"{found.decoded:,} bytes and make room for a case database that large",
    )
