"""Reading engine log files: plain or gzip, line prefixes, ranks and spliced lines.

A physical line may hold one record or, when several processes wrote to the same file at once,
several records glued together; `split_records` cuts it at every embedded SGLang prefix."""

from __future__ import annotations

import gzip
import io
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path
from typing import BinaryIO

from forensics.base.isotime import parse_iso
from forensics.errors import InputError

_GZIP_MAGIC = b"\x1f\x8b"
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_RANK = re.compile(r"([A-Z][A-Z_]*?)(\d+)")

# SGLang: [2026-08-27 10:00:00 DP0 TP3 EP3], [2026-08-27 10:00:00.123] (SGLANG_LOG_MS), and
# before 0.4 [10:00:00 TP0] (no date: the time stays unknown).
_SGLANG_PREFIX = re.compile(
    r"\[((?:\d{4}-\d{2}-\d{2}[ T])?\d{2}:\d{2}:\d{2}(?:[.,]\d{1,6})?)((?: [A-Z][A-Z_]*\d+)*)\] ?"
)
# vLLM: (EngineCore_DP0 pid=12) INFO 08-27 10:00:00 [kv_cache_utils.py:1148] (process optional;
# older builds write `llm_engine.py:237]` without the opening bracket)
_VLLM_PREFIX = re.compile(
    r"^(?:\((?P<proc>[^)]*?)\s+pid=\d+\)\s+)?"
    r"(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\s+"
    r"(?P<ts>(?:\d{4}-)?\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:[.,]\d{1,6})?)\s+"
    r"(?:\[[^\]]*\]|[\w./-]+:\d+\])\s?"
)
# Where a vLLM record starts inside a line (to cut records that processes glued together).
_VLLM_START = re.compile(
    r"(?:\([^()]*? pid=\d+\)\s+)?(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\s+"
    r"(?:\d{4}-)?\d{2}-\d{2} \d{2}:\d{2}:\d{2}"
)
# A collector's timestamp in front of everything (kubectl logs --timestamps, journald exports).
_LEADING_ISO = re.compile(
    r"^(\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2})(?:\.(\d+))?(Z|[+-]\d{2}:?\d{2})?(?:\s+|$)"
)
# Wrappers whose message is the engine's line: docker's json-file ({"log": ..., "time": ...}) and
# JSON logging ({"message": ..., "timestamp": ...}).
_JSON_TEXT = ("log", "message", "msg")
_JSON_TIME = ("time", "timestamp", "@timestamp", "asctime", "ts")
_PROC_RANK = re.compile(r"(?:^|[_ ])(DP|TP|PP|EP|rank)[=_ ]?(\d+)", re.IGNORECASE)

Ranks = tuple[tuple[str, int], ...]


@dataclass(frozen=True, slots=True)
class Record:
    """One log record: its time (as written, node-local clock), ranks and message body.

    The time is read from its text only when asked for: most records match nothing that keeps
    it, and reading a time costs more than the rest of the record."""

    stamp: str  # the record prefix's time as written, "" when it has none
    lead_ts: datetime | None  # a collector's time in front of the line
    ranks: Ranks
    body: str
    prefixed: bool = False  # began with an SGLang bracket prefix

    @property
    def ts(self) -> datetime | None:
        return _parse_ts(self.stamp) or self.lead_ts


def _open(path: Path, magic: bytes) -> BinaryIO:
    if magic.startswith(_GZIP_MAGIC):
        return gzip.GzipFile(path, "rb")  # type: ignore[return-value]
    if magic == _ZSTD_MAGIC:
        import zstandard

        return io.BufferedReader(zstandard.ZstdDecompressor().stream_reader(path.open("rb")))
    return path.open("rb")


def open_lines(path: Path) -> Iterator[str]:
    """The lines of a plain, gzip or zstd file (detected by content), without line endings.

    Undecodable bytes become U+FFFD; a compressed file cut short yields the lines read so far."""
    try:
        with path.open("rb") as probe:
            magic = probe.read(4)
    except OSError as exc:
        raise InputError(f"cannot read the log file: {exc.strerror}", path=str(path)) from exc
    try:
        with _open(path, magic) as handle:
            for raw in handle:
                yield raw.decode("utf-8", errors="replace").rstrip("\r\n")
    except (EOFError, gzip.BadGzipFile, _zstd_error()):
        return  # a cut-off stream: what was read stays, the rest is lost


def _zstd_error() -> type[Exception]:
    try:
        import zstandard
    except ImportError:  # pragma: no cover - zstandard is a dependency
        return EOFError
    return zstandard.ZstdError


def clean(line: str) -> str:
    """Drop terminal colour codes, a byte-order mark and trailing blanks."""
    if "\x1b" in line:
        line = _ANSI.sub("", line)
    return line.lstrip("\ufeff").rstrip()


def _parse_ts(text: str) -> datetime | None:
    """A dated time; None for a time without a date (vLLM, SGLang before 0.4). Not
    forensics.base.isotime: Python logging writes the fraction after a comma, and a time without
    an offset is kept as the log wrote it (naive), never refused."""
    if len(text) < 19:
        return None
    try:
        return datetime.fromisoformat(text.replace(",", "."))
    except ValueError:
        return None


@lru_cache(maxsize=4096)
def ranks_of(text: str) -> Ranks:
    """The ranks of a prefix (' DP0 TP3'); a file repeats a few, so each is read once."""
    return tuple((name, int(num)) for name, num in _RANK.findall(text))


def _proc_ranks(proc: str | None) -> Ranks:
    if not proc:
        return ()
    return tuple((name.upper(), int(num)) for name, num in _PROC_RANK.findall(proc))


def _collector_time(text: str) -> tuple[datetime | None, int]:
    """A collector's ISO time at the start of `text` (converted to UTC when it has an offset)
    and where the rest begins."""
    lead = _LEADING_ISO.match(text)
    if not lead:
        return None, 0
    base, frac, zone = lead.groups()
    ts = _parse_ts(base + (f".{frac[:6]}" if frac else ""))
    if ts is not None and zone:
        aware = parse_iso(base + zone)
        ts = aware.astimezone(UTC).replace(tzinfo=None, microsecond=ts.microsecond)
    return ts, lead.end()


def unwrap(line: str) -> tuple[str, datetime | None]:
    """The engine's own text of a physical line, and a collector's time if one was added."""
    if line.startswith("{") and line.endswith("}"):
        try:
            obj = json.loads(line)
        except ValueError:
            obj = None
        if isinstance(obj, dict):
            text = next((obj[k] for k in _JSON_TEXT if isinstance(obj.get(k), str)), None)
            if text is not None:
                when = next((obj[k] for k in _JSON_TIME if isinstance(obj.get(k), str)), "")
                return clean(text), _collector_time(when)[0]
    ts, start = _collector_time(line)
    return line[start:], ts


def split_records(line: str) -> list[Record]:
    """Cut a cleaned physical line into records.

    Every SGLang bracket prefix starts a new record (so text that two processes glued together is
    separated); otherwise a vLLM prefix, or none, gives one record."""
    text, lead_ts = unwrap(line)
    first = _SGLANG_PREFIX.match(text)
    rest = text[first.end() :] if first else ""
    if first and "[" not in rest:  # the common case: one record
        return [Record(first.group(1), lead_ts, ranks_of(first.group(2)), rest.rstrip(), True)]
    starts = list(_SGLANG_PREFIX.finditer(text))
    if not starts:
        return _split_plain(text, lead_ts)
    records = []
    if starts[0].start() > 0 and text[: starts[0].start()].strip():
        records.append(_plain_record(text[: starts[0].start()], lead_ts))
    for here, nxt in zip(starts, [*starts[1:], None], strict=True):
        end = nxt.start() if nxt else len(text)
        body = text[here.end() : end].rstrip()
        records.append(Record(here.group(1), lead_ts, ranks_of(here.group(2)), body, True))
    return records


def _split_plain(text: str, lead_ts: datetime | None) -> list[Record]:
    """Records of a line without SGLang prefixes: cut at every vLLM record start."""
    cuts = [m.start() for m in _VLLM_START.finditer(text)]
    if not cuts or cuts == [0]:
        return [_plain_record(text, lead_ts, bool(cuts))]
    bounds = [0, *cuts] if cuts[0] > 0 else cuts
    pieces = zip(bounds, [*bounds[1:], len(text)], strict=True)
    return [
        _plain_record(text[a:b].rstrip(), lead_ts, a in cuts)
        for a, b in pieces
        if text[a:b].strip()
    ]


def _plain_record(text: str, lead_ts: datetime | None, prefixed: bool = False) -> Record:
    match = _VLLM_PREFIX.match(text)
    if not match:
        return Record("", lead_ts, (), text, prefixed)
    ranks = _proc_ranks(match.group("proc"))  # a time without a year (14 characters) is unknown
    return Record(match.group("ts"), lead_ts, ranks, text[match.end() :], prefixed)


def is_primary(ranks: Ranks) -> bool:
    """Rank 0 of every dimension except DP (each DP rank has its own KV pool)."""
    return all(num == 0 for name, num in ranks if name != "DP")


def dp_rank(ranks: Ranks) -> int:
    return next((num for name, num in ranks if name == "DP"), 0)
