"""What a file holds, from its first bytes, where that is not what its name says.

A gzip or zstd stream, a Parquet file, a ZIP archive (a spreadsheet saved as .xlsx), an old
Excel workbook, UTF-16 or UTF-32 text, or (where the name says compressed) plain text: such a
file stops ingest with a message that says what it holds and the name it should have, instead
of a reader's complaint about the bytes (a header of binary column names, a damaged stream)."""

from __future__ import annotations

from pathlib import PurePosixPath

from forensics.case.discover import InputFile
from forensics.errors import InputError

HEAD = 16  # bytes enough to tell every kind below
_MAGIC = [  # longest first where one starts another
    (b"\xff\xfe\x00\x00", "utf32"),
    (b"\x00\x00\xfe\xff", "utf32"),
    (b"\xff\xfe", "utf16"),
    (b"\xfe\xff", "utf16"),
    (b"\x1f\x8b", "gzip"),
    (b"\x28\xb5\x2f\xfd", "zstd"),
    (b"PAR1", "parquet"),
    (b"PK\x03\x04", "zip"),
    (b"\xd0\xcf\x11\xe0", "xls"),
]
_WHAT = {
    "gzip": "gzip-compressed data",
    "zstd": "zstd-compressed data",
    "parquet": "a Parquet file",
    "zip": "a ZIP archive (such as a spreadsheet saved as .xlsx)",
    "xls": "an Excel workbook",
    "utf16": "UTF-16 text",
    "utf32": "UTF-32 text",
    "text": "plain text (not compressed)",
}
_FORMAT = {"csv": "CSV text", "jsonl": "JSON Lines text", "parquet": "Parquet"}
_SUFFIX = {"gzip": ".gz", "zstd": ".zst"}


def holds(head: bytes) -> str | None:
    """The kind of data that starts with these bytes, where it is one of the kinds above."""
    for magic, kind in _MAGIC:
        if head.startswith(magic):
            return kind
    pairs = head[:8]
    if len(pairs) == 8 and (_zeros(pairs[1::2], pairs[0::2]) or _zeros(pairs[0::2], pairs[1::2])):
        return "utf16"  # without a byte order mark: every other byte of ASCII text is NUL
    return None


def _zeros(zero: bytes, other: bytes) -> bool:
    return not any(zero) and all(other)


def _plain_text(head: bytes) -> bool:
    text = head.decode("utf-8", "ignore")
    return len(text) >= len(head) - 3 and all(c.isprintable() or c in "\t\r\n" for c in text)


def check_raw(f: InputFile, head: bytes) -> None:
    """Stop where a compressed file's first bytes are another kind of data (called when its
    stream cannot be read)."""
    kind = holds(head) or ("text" if head and _plain_text(head) else None)
    if kind is not None and kind != f.compression:
        raise _misnamed(f, kind, inside=None)


def check_content(f: InputFile, head: bytes) -> None:
    """Stop where a text file's (decompressed) first bytes are another kind of data."""
    kind = holds(head)
    if kind is not None and f.fmt != "parquet":
        raise _misnamed(f, kind, inside=f.compression)


def _misnamed(f: InputFile, kind: str, inside: str | None) -> InputError:
    says = _FORMAT[f.fmt] + (f", {f.compression}-compressed" if f.compression else "")
    plain = f.rel[: -len(_SUFFIX[f.compression])] if f.compression else f.rel
    return InputError(
        f"its name says {says}, but it holds {_WHAT[kind]}; nothing was loaded from the case",
        path=f.rel,
        fix=_fix(kind, plain, inside),
    )


def _fix(kind: str, plain: str, inside: str | None) -> str:
    if kind in ("gzip", "zstd"):
        return f"name it {plain}{_SUFFIX[kind]} (or decompress it)"
    if kind == "parquet":
        name = PurePosixPath(plain).with_suffix(".parquet").as_posix()
        return f"name it {name}{_SUFFIX[inside] if inside else ''}"
    if kind == "text":
        return f"name it {plain} (without the compression suffix)"
    if kind in ("utf16", "utf32"):
        encoding = "UTF-16" if kind == "utf16" else "UTF-32"
        return f"save it as UTF-8 text (for example: iconv -f {encoding} -t UTF-8)"
    return "export the table as CSV (UTF-8) or Parquet, named after the table"
