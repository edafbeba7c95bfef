"""Before a file is parsed: is it whole, and how many physical records does it hold?

A compressed file must end where its compression says it ends: a gzip member or zstd frame cut
short stops ingest. A compressed text file whose text stops in the middle of a line was cut at a
frame (or member) boundary and stops ingest too. For CSV, the quote structure is followed line by
line (RFC 4180: a quote inside a quoted field is doubled), so a quote that is never closed, or one
that would join whole rows into one value, stops ingest naming the line instead of swallowing
the lines after it. The record count found here is checked against what the reader returned."""

from __future__ import annotations

import codecs
import csv
import io
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import zstandard

from forensics.case.discover import InputFile
from forensics.errors import InputError
from forensics.ingest import filekind

CHUNK = 1 << 22
OTHER_DELIMITERS = {";": "semicolon", "\t": "tab", "|": "vertical bar"}


@dataclass
class Scan:
    """What a file holds: physical data lines (non-blank) and, for CSV, its records and header."""

    lines: int = 0
    records: int = 0
    header: list[str] = field(default_factory=list)
    empty: bool = True


class _Cut(Exception):
    """The compressed stream ends before its end marker."""


def _gzip_chunks(raw: Iterator[bytes]) -> Iterator[tuple[bytes, int]]:
    """Decompressed chunks and the number of members seen so far; _Cut when a member is cut."""
    members = 0
    dec = None
    for block in raw:
        data = block
        while data:
            if dec is None:
                dec = zlib.decompressobj(31)
                members += 1
            yield dec.decompress(data), members
            if dec.eof:
                data = dec.unused_data
                dec = None
                if data and not data.strip(b"\x00"):
                    data = b""  # zero padding after the last member (tape and block devices)
            else:
                data = b""
    if dec is not None and not dec.eof:
        raise _Cut
    if members == 0:
        raise _Cut


def _zstd_chunks(raw: Iterator[bytes]) -> Iterator[tuple[bytes, int]]:
    frames = 0
    dec = None
    for block in raw:
        data = block
        while data:
            if dec is None:
                dec = zstandard.ZstdDecompressor().decompressobj()
                frames += 1
            yield dec.decompress(data), frames
            if dec.eof:
                data = dec.unused_data
                dec = None
            else:
                data = b""
    if dec is not None and not dec.eof:
        raise _Cut
    if frames == 0:
        raise _Cut


def _raw_blocks(path: Path) -> Iterator[bytes]:
    with path.open("rb") as handle:
        while block := handle.read(CHUNK):
            yield block


def text_blocks(f: InputFile, lines: bool = True) -> Iterator[bytes]:
    """The file's decompressed bytes, in blocks; InputError when the compression is cut, or
    (lines: a text file) when its text does not end with a line end, as a file cut at a frame
    or member boundary does."""
    if f.compression is None:
        for i, block in enumerate(_raw_blocks(f.path)):
            if i == 0:
                filekind.check_content(f, block[: filekind.HEAD])
            yield block
        return
    reader = _gzip_chunks if f.compression == "gzip" else _zstd_chunks
    frames = 0
    last = b""
    try:
        for data, count in reader(_raw_blocks(f.path)):
            frames = count
            if data:
                if not last:
                    filekind.check_content(f, data[: filekind.HEAD])
                last = data
                yield data
    except _Cut:
        raise _cut_error(f, "the compressed data ends before its end marker") from None
    except (zlib.error, zstandard.ZstdError) as exc:
        with f.path.open("rb") as handle:
            filekind.check_raw(f, handle.read(filekind.HEAD))  # another kind of file
        raise _cut_error(f, f"the compressed data is damaged ({exc})") from None
    if lines and last and not last.endswith(b"\n"):
        raise _cut_error(
            f,
            f"its text stops in the middle of a line after {frames} compressed "
            "frame(s), as a file cut at a frame boundary does (if the file is "
            "complete, end its last line with a line end)",
        )


def _cut_error(f: InputFile, why: str) -> InputError:
    kind = "gzip" if f.compression == "gzip" else "zstd"
    return InputError(
        f"this {kind} file is incomplete: {why}; nothing was loaded from the case",
        path=f.rel,
        fix="copy the complete file again (compare its size or checksum with the "
        "source), or remove it from the case folder",
    )


def scan_file(f: InputFile) -> Scan:
    """Check a CSV or JSON Lines file (after decompression) and count its records."""
    if f.fmt == "csv":
        return _CsvScan(f).run()
    scan = Scan()
    carry = b""
    for block in text_blocks(f):
        scan.empty = False
        lines = (carry + block).split(b"\n")
        carry = lines.pop()
        scan.lines += sum(1 for line in lines if line.strip())
    if carry.strip():
        scan.lines += 1
    scan.records = scan.lines
    return scan


def ends_quoted(line: bytes, quoted: bool) -> bool:
    """Whether a line ends inside a quoted field, given whether it starts inside one. As the
    reader does: a quote opens a field only at the field's start; inside, a doubled quote is a
    quote and a single one closes the field; elsewhere a quote is a plain character."""
    i, n, at_start = 0, len(line), not quoted
    while i < n:
        if quoted:
            j = line.find(b'"', i)
            if j < 0:
                return True
            if line[j + 1 : j + 2] == b'"':
                i = j + 2
                continue
            quoted, at_start, i = False, False, j + 1
        elif at_start and line[i : i + 1] == b'"':
            quoted, i = True, i + 1
        else:
            j = line.find(b",", i)
            if j < 0:
                return False
            at_start, i = True, j + 1
    return quoted


def spanning_separators(lines: list[bytes]) -> int:
    """The most commas held by one quoted value of a record that runs over these lines and
    holds a line break: a value holding a whole row's worth of them (a stray quote joining
    rows) stops ingest, a value that merely holds a line break (in any column) does not."""
    text = codecs.decode(b"\n".join(lines), "utf-8", "replace")
    try:
        values = next(csv.reader(io.StringIO(text, newline="")), [])
    except csv.Error:  # a value beyond the csv module's field size: count every comma
        return text.count(",")
    return max((v.count(",") for v in values if "\n" in v or "\r" in v), default=0)


class _CsvScan:
    """Follows quoted fields line by line (see ends_quoted), so a record that runs over several
    lines is seen, and where it opened."""

    def __init__(self, f: InputFile):
        self.f = f
        self.scan = Scan()
        self.line_no = 0
        self.open_line = 0  # the line where the open quoted field began (0: none open)
        self.record_lines: list[bytes] = []

    def run(self) -> Scan:
        carry = b""
        for block in text_blocks(self.f):
            self.scan.empty = False
            joined = carry + block
            lines = joined.split(b"\n")
            carry = lines.pop()
            end = len(joined) - len(carry)  # a return not before a line feed is bare
            bare = joined.count(b"\r", 0, end) != joined.count(b"\r\n", 0, end)
            self._lines(lines, fast=b'"' not in joined and not self.open_line, bare=bare)
        if carry:
            self._lines([carry], fast=False, bare=True)
        if self.open_line:
            self._unclosed()
        if not self.scan.header:
            raise InputError(
                "the file is empty: it has no header row",
                path=self.f.rel,
                fix="write the header row (the column names), or remove the file",
            )
        return self.scan

    def _lines(self, lines: list[bytes], fast: bool, bare: bool) -> None:
        if fast and self.scan.header:
            if bare:
                for i, line in enumerate(lines):
                    self._bare_return(line, self.line_no + i + 1)
            blank = sum(1 for line in lines if not line.rstrip(b"\r"))
            self.line_no += len(lines)
            self.scan.lines += len(lines) - blank
            self.scan.records += len(lines) - blank
            return
        for line in lines:
            self._line(line)

    def _line(self, line: bytes) -> None:
        self.line_no += 1
        blank = not line.rstrip(b"\r")
        if not self.open_line:
            if blank:
                return
            if b'"' not in line:
                self._bare_return(line, self.line_no)
            if not self.scan.header and not self.record_lines:
                self.record_lines = [line]
            else:
                self.scan.records += 1
                self.scan.lines += 1
                self.record_lines = [line]
            if ends_quoted(line, False):
                self.open_line = self.line_no
            elif not self.scan.header:
                self._header(line)
            return
        self.scan.lines += 0 if blank else 1
        self.record_lines.append(line)
        if not ends_quoted(line, True):
            self._closed()

    def _bare_return(self, line: bytes, line_no: int) -> None:
        """A carriage return inside a line without quotes (a CRLF's ends the line) is a line
        end the reader does not take: name its line instead of the reader's parse error."""
        if b"\r" in line.rstrip(b"\r") and self.scan.header:
            raise InputError(
                f"line {line_no}: a carriage return inside the line, in an unquoted value (or "
                "lines ending in a carriage return alone); nothing was loaded from the case",
                path=self.f.rel,
                fix="end each line with LF or CRLF, and enclose a value that holds a carriage "
                "return in quotes",
            )

    def _closed(self) -> None:
        opened, lines = self.open_line, self.record_lines
        self.open_line = 0
        if not self.scan.header:
            raise InputError(
                f"the header row (line {opened}) runs over {len(lines)} lines: a quote in it is "
                "not closed on its line",
                path=self.f.rel,
                fix="close the quote in the header",
            )
        width = len(self.scan.header)
        if width > 1 and spanning_separators(lines) >= width - 1:
            raise InputError(
                f"line {opened}: a quote opens a field that is closed only on line "
                f"{self.line_no}, so {len(lines) - 1} line(s) holding whole rows would be read "
                "as one value; nothing was loaded from the case",
                path=self.f.rel,
                fix=f"fix the quote on line {opened} (a quote inside a value "
                'is written twice: ""; a value holding a quote is enclosed in quotes)',
            )

    def _unclosed(self) -> None:
        after = self.line_no - self.open_line
        raise InputError(
            f"line {self.open_line}: a quote opens a field that is never closed, so the {after} "
            "line(s) after it would be read as one value; nothing was loaded from the case",
            path=self.f.rel,
            fix=f"fix the quote on line {self.open_line} (a quote inside a "
            'value is written twice: ""; a value holding a quote is enclosed in quotes)',
        )

    def _header(self, line: bytes) -> None:
        text = codecs.decode(line.rstrip(b"\r"), "utf-8", "replace").lstrip("\ufeff")
        try:
            names = next(csv.reader([text], strict=True))
        except csv.Error as exc:
            kind = "a carriage return" if "\r" in text else "a character it cannot hold"
            raise InputError(
                f"the header row cannot be read ({exc}); it holds {kind}",
                path=self.f.rel,
                fix="write the header as comma-separated names on the first line, lines ending "
                "in LF or CRLF",
            ) from None
        self.scan.header = names
        self.record_lines = []
        check_header(self.f, names, text)


def check_header(f: InputFile, names: list[str], text: str) -> None:
    """A header that names a column twice, or looks like it uses another delimiter, stops."""
    if len(names) == 1:
        for sep, word in OTHER_DELIMITERS.items():
            if sep in text:
                raise InputError(
                    f"the header '{text[:120]}' has no comma but a {word}: the file looks like "
                    f"it uses '{sep}' as its delimiter",
                    path=f.rel,
                    fix="kvforensics reads comma-separated files; convert the file to commas",
                )
    seen: dict[str, str] = {}  # names as the CSV reader binds them (without regard to case)
    for name in names:
        key = name.strip()
        if not key:  # a blank name is labelled by its place (forensics.ingest.readers)
            continue
        first = seen.get(key.casefold())
        if first is not None:
            also = "" if first == key else f" (as '{first}' and '{key}': case does not count)"
            raise InputError(
                f"the header names the column '{first}' twice{also}",
                path=f.rel,
                fix="rename or remove one of the two columns",
            )
        seen[key.casefold()] = key
