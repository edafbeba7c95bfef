"""Large JSON Lines files are loaded in parts, so memory stays bounded whatever their size.

A JSON Lines file (after decompression) larger than CHUNK_BYTES is cut at line ends into plain
parts in the work folder; each part is staged, checked and inserted on its own, its rows
numbered on from the lines before it. Memory then depends on the part size, not the file size
(the contents of a long-context case can hold hundreds of megabytes of token ids)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

from forensics.case.discover import InputFile
from forensics.ingest.integrity import text_blocks

CHUNK_BYTES = 96 << 20


def jsonl_parts(
    f: InputFile, workdir: Path, chunk_bytes: int | None = None
) -> Iterator[tuple[InputFile, int]]:
    """(part, physical lines before it) for a JSON Lines file; the file itself when small."""
    chunk_bytes = chunk_bytes or CHUNK_BYTES
    if f.compression is None and f.path.stat().st_size <= chunk_bytes:
        yield f, 0
        return
    buffer = bytearray()
    lines_before = 0
    index = 0
    for block in text_blocks(f):
        buffer += block
        if len(buffer) < chunk_bytes:
            continue
        cut = buffer.rfind(b"\n") + 1
        if cut == 0:
            continue  # one line longer than a part: keep reading until it ends
        part = _write(f, workdir, index, bytes(buffer[:cut]))
        yield part, lines_before
        lines_before += buffer.count(b"\n", 0, cut)
        del buffer[:cut]
        index += 1
    if buffer or index == 0:
        yield _write(f, workdir, index, bytes(buffer)), lines_before


def _write(f: InputFile, workdir: Path, index: int, data: bytes) -> InputFile:
    path = workdir / f"part-{abs(hash(f.rel))}-{index}.jsonl"
    path.write_bytes(data)
    return replace(f, path=path, compression=None)
