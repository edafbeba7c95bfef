"""Parse one log file into counts, node observations and evidence rows.

Every physical line is counted once, as exactly one of: parsed (it holds a recognised message),
truncated (a recognised message cut short, or NUL bytes from a crash), or ignored (anything
else, blank lines and continuation lines included). `lines = parsed + truncated + ignored`."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from sys import intern

from forensics.logs import evidence, sglang, vllm
from forensics.logs.lines import (
    Ranks,
    Record,
    clean,
    is_primary,
    open_lines,
    ranks_of,
    split_records,
)
from forensics.logs.naming import LogFile
from forensics.logs.specs import Match, Spec, match_all

FACT_SPECS: tuple[Spec, ...] = sglang.SPECS + vllm.SPECS
ALL_SPECS: tuple[Spec, ...] = FACT_SPECS + evidence.SPECS
FACT_KEYS = (
    "pool_slots",
    "context_len",
    "page_size",
    "model",
    "role",
    "engine_version",
    "gpu_blocks",
    "blocks_override",
    "max_num_seqs",
    "max_num_batched_tokens",
    "chunked_prefill",
    "prefix_caching",
    "device",
    "data_parallel_size",
    "kv_cache_groups",
    "decode_radix_cache",
    "reserved_decode_tokens",
)


@dataclass(frozen=True)
class Observation:
    """One value read from one line: the raw material of node facts."""

    kind: str
    fact: str  # a FACT_KEYS name, or "start" for a start-up banner
    value: str
    ranks: Ranks
    ts: datetime | None
    src_file: str
    src_line: int
    complete: bool

    @property
    def primary(self) -> bool:
        return is_primary(self.ranks)


@dataclass(frozen=True)
class StatsLine:
    """One vLLM periodic stats line: its values as read (see forensics.logs.vllm.STATS)."""

    src_line: int
    stamp: str  # the time as written (vLLM writes no year)
    engine_index: int
    values: tuple[tuple[str, str], ...]


@dataclass
class FileResult:
    file: LogFile
    lines: int = 0
    parsed: int = 0
    truncated: int = 0
    ignored: int = 0
    spliced: int = 0
    kinds: Counter[str] = field(default_factory=Counter)
    truncated_kinds: Counter[str] = field(default_factory=Counter)
    engines: Counter[str] = field(default_factory=Counter)
    observations: list[Observation] = field(default_factory=list)
    evidence: list[evidence.Evidence] = field(default_factory=list)
    rooms: dict[int, str] = field(default_factory=dict)
    # SGLang prefill batch counts, (line, time as written, ranks, new seqs, new tokens, cached
    # tokens) as text, of every rank (forensics.logs.counters keeps the rank that logs batches)
    prefill_counts: list[tuple[int, str, Ranks, str, str, str]] = field(default_factory=list)
    stats: list[StatsLine] = field(default_factory=list)  # vLLM periodic stats lines
    # lines cut short or damaged: (line number, which lines they began as), quarantined by ingest
    cut: list[tuple[int, str]] = field(default_factory=list)

    @property
    def engine(self) -> str | None:
        return self.engines.most_common(1)[0][0] if self.engines else None


def parse_file(log: LogFile) -> FileResult:
    result = FileResult(log)
    for lineno, raw in enumerate(open_lines(log.path), start=1):
        result.lines += 1
        _parse_line(result, lineno, raw)
    return result


# A line that is one SGLang record whose only recognised message is a whole batch line, the
# bulk of a busy engine's log: such a line is parsed and only counted, and a prefill batch's
# counts kept (see _use), which this tells without cutting it into records. It is
# lines._SGLANG_PREFIX (time and ranks captured), the batch spec's head (a prefill batch's
# counts captured), and no "[" after it (no second record, no colour code); the spec's full tail
# ends it; and it holds no other spec's needle, no bootstrap room and no NUL byte.
_BATCH_LINE = re.compile(
    r"\[((?:\d{4}-\d{2}-\d{2}[ T])?\d{2}:\d{2}:\d{2}(?:[.,]\d{1,6})?)((?: [A-Z][A-Z_]*\d+)*)\] ?"
    rf"(?:{sglang.PREFILL_COUNTS}|(?:Prefill|Decode) batch[.,] #)[^\[]*"
)
_NOT_ONLY_A_BATCH = (*(s.needle for s in ALL_SPECS if s is not sglang.BATCH), "room", "\x00")
# The needles looked for in fewer steps: each gate is one character, found by a fast scan, that
# is part of every needle grouped under it, so a line without the gate holds none of them (and a
# batch line holds none of the gates); only the needles with no gate are always looked for.
_GATES = ("K", "=", "A", "M", "I", "_", "\x00")
_GATED = tuple(
    (gate, group)
    for i, gate in enumerate(_GATES)
    if (group := tuple(n for n in _NOT_ONLY_A_BATCH if gate in n and not set(_GATES[:i]) & set(n)))
)
_UNGATED = tuple(n for n in _NOT_ONLY_A_BATCH if not any(g in n for g in _GATES))
_TAIL_CHARS = 96  # where the full tail is looked for: a longer one takes the general path
_TAIL_OPENINGS = ("throughput (token/s): ", "#queue-req: ")  # those of sglang.BATCH.full
_BATCH_KIND, _BATCH_ENGINE = sglang.BATCH.kind, sglang.BATCH.engine


def only_a_batch(raw: str) -> re.Match[str] | None:
    """The physical line as one whole batch line and nothing else (see _BATCH_LINE), or None."""
    found = _BATCH_LINE.fullmatch(raw)
    if found is None:
        return None
    # The full tail can only begin at the last of its two openings (what follows a match is
    # digits and blanks): matched there, not searched for.
    start = max(raw.rfind(_TAIL_OPENINGS[0]), raw.rfind(_TAIL_OPENINGS[1]))
    if start < max(0, len(raw) - _TAIL_CHARS) or sglang.BATCH.full.match(raw, start) is None:
        return None
    for needle in _UNGATED:
        if needle in raw:
            return None
    for gate, needles in _GATED:
        if gate in raw:
            for needle in needles:
                if needle in raw:
                    return None
    return found


def _parse_line(result: FileResult, lineno: int, raw: str) -> None:
    if " batch" in raw:
        batch = only_a_batch(raw)
        if batch is not None:
            result.kinds[_BATCH_KIND] += 1  # as _count does for a whole batch line, inline
            result.engines[_BATCH_ENGINE] += 1
            result.parsed += 1
            if batch.lastindex == 5:  # a prefill batch: its counts were captured
                stamp, text, seqs, new, cached = batch.groups()
                ranks = _PREFIX_RANKS.get(text) or _prefix_ranks(text, result.file.ranks)
                row = (lineno, intern(stamp), ranks, seqs, new, cached)  # a second's lines share
                result.prefill_counts.append(row)
            return
    damaged = "\x00" in raw
    records = split_records(clean(raw.replace("\x00", "") if damaged else raw))
    if len(records) > 1:
        result.spliced += sum(r.prefixed for r in records) > 1
    parsed = [_parse_record(result, lineno, rec) for rec in records]
    statuses = [status for status, _ in parsed]
    if damaged or "truncated" in statuses:
        result.truncated += 1
        cut = ", ".join(sorted({kind for _, kinds in parsed for kind in kinds}))
        if damaged:
            cut = f"NUL bytes in the line; {cut}" if cut else "NUL bytes in the line"
        result.cut.append((lineno, cut))
    elif "parsed" in statuses:
        result.parsed += 1
    else:
        result.ignored += 1


def _prefix_ranks(text: str, file_ranks: Ranks) -> Ranks:
    """The ranks of a prefix's text (' DP0 TP3'), remembered in _PREFIX_RANKS; the file's
    ranks where the prefix names none."""
    if not text:
        return file_ranks
    ranks = ranks_of(text)
    if len(_PREFIX_RANKS) < 4096:
        _PREFIX_RANKS[text] = ranks
    return ranks


_PREFIX_RANKS: dict[str, Ranks] = {}  # a log repeats a few prefixes


def _parse_record(result: FileResult, lineno: int, rec: Record) -> tuple[str, list[str]]:
    """How the record read (parsed, truncated or ignored), and the kinds of line it began as
    but did not finish."""
    pair = evidence.room_pairs(rec.body) if "room" in rec.body else None
    if pair:
        result.rooms.setdefault(pair[1], pair[0])
    matches = match_all(ALL_SPECS, rec.body)
    for match in matches:
        _use(result, lineno, rec, match)
    if not matches:
        return "ignored", []
    cut = [m.spec.kind for m in matches if not m.complete]
    return ("truncated" if cut else "parsed"), cut


def _count(result: FileResult, match: Match) -> None:
    (result.kinds if match.complete else result.truncated_kinds)[match.spec.kind] += 1
    result.engines[match.spec.engine] += 1


def _stamp(rec: Record) -> str:
    """A counter line's time as written; a collector's time where the line has no dated one."""
    if len(rec.stamp) >= 19 or rec.lead_ts is None:
        return rec.stamp
    return rec.lead_ts.isoformat(sep=" ")


def _keep_counters(result: FileResult, lineno: int, rec: Record, match: Match) -> None:
    """A prefill batch's counts (not a decode batch's: only counted), or a stats line."""
    v = match.values
    if match.spec is vllm.STATS:
        values = tuple(sorted((k, x) for k, x in v.items() if k != "engine_index"))
        index = int(v.get("engine_index", "0"))
        result.stats.append(StatsLine(lineno, _stamp(rec), index, values))
        return
    if "new_tokens" in v:
        ranks = rec.ranks or result.file.ranks
        row = (
            lineno,
            intern(_stamp(rec)),
            ranks,
            v["new_seqs"],
            v["new_tokens"],
            v["cached_tokens"],
        )
        result.prefill_counts.append(row)


def _use(result: FileResult, lineno: int, rec: Record, match: Match) -> None:
    _count(result, match)
    kind = match.spec.kind
    if match.spec is sglang.BATCH or match.spec is vllm.STATS:
        _keep_counters(result, lineno, rec, match)
        return
    is_evidence = kind.startswith("evidence.")
    if not (is_evidence or match.spec.starts_run or match.values):
        return  # a message only counted (a batch line): no time, ranks or values to keep
    src = (result.file.rel, lineno)
    ranks = rec.ranks or result.file.ranks
    ts = rec.ts
    if is_evidence:
        result.evidence.append(
            evidence.build(match, result.file.node, ts, rec.body, src, is_primary(ranks))
        )
        return
    if match.spec.starts_run:
        result.observations.append(
            Observation(kind, "start", kind, ranks, ts, src[0], lineno, match.complete)
        )
    for key in FACT_KEYS:
        if key in match.values:
            result.observations.append(
                Observation(kind, key, match.values[key], ranks, ts, src[0], lineno, match.complete)
            )
