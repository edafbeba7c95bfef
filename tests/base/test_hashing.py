"""File checksums: the same SHA-256 as hashing the whole file at once, for files of no bytes,
of less than a block, of whole blocks and of a block and a bit; the block reader hands on
every byte once, in order, whatever the stream's reads return."""

from __future__ import annotations

import hashlib
import io
import os
from pathlib import Path

import pytest

from forensics.base.hashing import BLOCK, blocks, sha256_file
from forensics.ledger.external import sha256_of


@pytest.mark.parametrize("size", [0, 1, BLOCK - 1, BLOCK, 2 * BLOCK, 2 * BLOCK + 17])
def test_a_files_checksum_is_that_of_its_bytes(tmp_path: Path, size: int) -> None:
    data = os.urandom(size)
    path = tmp_path / "f.bin"
    path.write_bytes(data)
    assert sha256_file(path) == hashlib.sha256(data).hexdigest()
    copy = tmp_path / "copy.bin"
    assert sha256_of(str(path), copy) == (hashlib.sha256(data).hexdigest(), size)
    assert copy.read_bytes() == data


class Dribbling(io.RawIOBase):
    """A stream whose reads return fewer bytes than asked (a pipe, a network stream)."""

    def __init__(self, data: bytes, most: int) -> None:
        self.data, self.at, self.most = data, 0, most

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        n = min(len(buffer), self.most, len(self.data) - self.at)
        buffer[:n] = self.data[self.at : self.at + n]
        self.at += n
        return n


def test_the_blocks_are_the_streams_bytes_in_order() -> None:
    data = os.urandom(10_000)
    seen = [bytes(b) for b in blocks(Dribbling(data, 3_001), size=4_096)]
    assert b"".join(seen) == data
    assert [len(b) for b in seen] == [3_001, 3_001, 3_001, 997]
    assert [bytes(b) for b in blocks(io.BytesIO(data), size=4_096)] == [
        data[:4_096],
        data[4_096:8_192],
        data[8_192:],
    ]
