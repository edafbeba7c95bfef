"""The engines' own token counters, as rows of `engine_counters`: one per SGLang prefill batch
line (its new seqs, new tokens and cached tokens) and one per vLLM periodic stats line (its
prompt and generation throughput, running and waiting requests and prefix-cache hit rate). Built
column by column: a busy SGLang node logs millions of batch lines."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from forensics.base.arrow import column_of, columns_table, from_numpy, repeated
from forensics.logs.lines import Ranks, dp_rank
from forensics.logs.parse import FileResult, StatsLine

PREFILL_KIND = "sglang.prefill-batch"
STATS_KIND = "vllm.stats"

SCHEMA = pa.schema(
    [
        ("node", pa.string()),
        ("dp_rank", pa.int64()),
        ("stamp", pa.string()),
        ("kind", pa.string()),
        ("new_seqs", pa.int64()),
        ("new_tokens", pa.int64()),
        ("cached_tokens", pa.int64()),
        ("prompt_throughput", pa.float64()),
        ("generation_throughput", pa.float64()),
        ("running", pa.int64()),
        ("waiting", pa.int64()),
        ("prefix_hit_rate", pa.float64()),
        ("src_file", pa.string()),
        ("src_line", pa.int64()),
    ]
)
_INTS = ("running", "waiting")
_FLOATS = ("prompt_throughput", "generation_throughput", "prefix_hit_rate")


@dataclass(frozen=True)
class FileCounters:
    """What one file's counter lines said (forensics.logs.parse.FileResult's lists)."""

    node: str
    file: str
    prefill: list[tuple[int, str, Ranks, str, str, str]] = field(default_factory=list)
    stats: list[StatsLine] = field(default_factory=list)

    @classmethod
    def of(cls, res: FileResult) -> FileCounters:
        return cls(res.file.node, res.file.rel, res.prefill_counts, res.stats)

    def __len__(self) -> int:
        return len(self.prefill) + len(self.stats)


def counters_table(files: list[FileCounters]) -> pa.Table:
    """One table of every file's counter lines: the prefill batches of the ranks that log them
    (see logging_ranks) laid out column by column (a million lines in about a second), then
    the stats lines."""
    kept = logging_ranks(files)
    prefill = [_prefill_table(f, kept) for f in files if f.prefill]
    stats = columns_table(_stats_columns(files), SCHEMA)
    return pa.concat_tables([*prefill, stats]) if prefill else stats


def logging_ranks(files: list[FileCounters]) -> dict[tuple[str, Ranks], int]:
    """{(node, ranks): DP rank} of the ranks whose prefill batch lines are kept: per node and
    DP rank, those with the lowest other ranks. SGLang 0.5 logs a batch from the attention TP
    rank 0 of each DP group (`DP1 TP4 EP4` under DP attention with 4 TP ranks a group), every
    PP stage alike; older builds from every TP rank. A DP rank no BIGINT holds (a damaged
    prefix) is left out."""
    seen: dict[tuple[str, Ranks], tuple[int, Ranks]] = {}
    lowest: dict[tuple[str, int], Ranks] = {}
    for f in files:
        for ranks in {row[2] for row in f.prefill}:
            dp = dp_rank(ranks)
            if dp >= 2**63:
                continue
            other = tuple(r for r in ranks if r[0] != "DP")
            seen[(f.node, ranks)] = (dp, other)
            if (f.node, dp) not in lowest or other < lowest[(f.node, dp)]:
                lowest[(f.node, dp)] = other
    return {key: dp for key, (dp, other) in seen.items() if lowest[(key[0], dp)] == other}


def _prefill_table(f: FileCounters, kept: dict[tuple[str, Ranks], int]) -> pa.Table:
    dps = {ranks: dp for (node, ranks), dp in kept.items() if node == f.node}
    rows = f.prefill
    if any(row[2] not in dps for row in rows):
        rows = [row for row in rows if row[2] in dps]
    n = len(rows)
    columns = list(zip(*rows, strict=True)) or [()] * 6  # line, stamp, ranks, seqs, new, cached
    arrays: dict[str, pa.Array] = {
        "node": repeated(f.node, n),
        "dp_rank": from_numpy(np.array([dps[r] for r in columns[2]], np.int64)),
        "stamp": column_of(columns[1], pa.string()),
        "kind": repeated(PREFILL_KIND, n),
        "new_seqs": _counts(columns[3]),
        "new_tokens": _counts(columns[4]),
        "cached_tokens": _counts(columns[5]),
        "src_file": repeated(f.file, n),
        "src_line": from_numpy(np.array(columns[0], np.int64)),
    }
    return pa.Table.from_arrays(
        [arrays.get(x.name, pa.nulls(n, x.type)) for x in SCHEMA], schema=SCHEMA
    )


def _counts(digits: tuple[str, ...]) -> pa.Array:
    """Counts as the log wrote them (digits, Unicode ones included); one beyond a BIGINT is
    NULL (no batch holds that many tokens: the line is damaged)."""
    try:
        return from_numpy(np.array(digits, np.int64))
    except (OverflowError, ValueError):
        return column_of([v if (v := int(x)) < 2**63 else None for x in digits], pa.int64())


def _stats_columns(files: list[FileCounters]) -> dict[str, list[object]]:
    cols: dict[str, list[object]] = {f.name: [] for f in SCHEMA}
    for f in files:
        for line in f.stats:
            values = dict(line.values)
            cols["node"].append(f.node)
            cols["dp_rank"].append(line.engine_index)
            cols["stamp"].append(line.stamp)
            cols["kind"].append(STATS_KIND)
            for name in ("new_seqs", "new_tokens", "cached_tokens"):
                cols[name].append(None)
            for name in _INTS:
                cols[name].append(_bounded(values.get(name)))
            for name in _FLOATS:
                cols[name].append(float(values[name]) if name in values else None)
            cols["src_file"].append(f.file)
            cols["src_line"].append(line.src_line)
    return cols


def _bounded(digits: str | None) -> int | None:
    value = int(digits) if digits is not None else None
    return value if value is not None and value < 2**63 else None
