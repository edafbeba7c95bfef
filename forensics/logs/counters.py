"""The engines' own token counters, as rows of `engine_counters`: one per SGLang prefill batch
line (its new seqs, new tokens and cached tokens) and one per vLLM periodic stats line (its
prompt and generation throughput, running and waiting requests and prefix-cache hit rate). Built
column by column: a busy SGLang node logs millions of batch lines."""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa

from forensics.base.arrow import columns_table
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
    prefill: list[tuple[int, str, int, str, str, str]] = field(default_factory=list)
    stats: list[StatsLine] = field(default_factory=list)

    @classmethod
    def of(cls, res: FileResult) -> FileCounters:
        return cls(res.file.node, res.file.rel, res.prefill_counts, res.stats)

    def __len__(self) -> int:
        return len(self.prefill) + len(self.stats)


def counters_table(files: list[FileCounters]) -> pa.Table:
    cols: dict[str, list[object]] = {f.name: [] for f in SCHEMA}
    for f in files:
        n = len(f.prefill)
        cols["node"] += [f.node] * n
        cols["dp_rank"] += [row[2] for row in f.prefill]
        cols["stamp"] += [row[1] for row in f.prefill]
        cols["kind"] += [PREFILL_KIND] * n
        for i, name in enumerate(("new_seqs", "new_tokens", "cached_tokens"), start=3):
            cols[name] += [int(row[i]) for row in f.prefill]
        for name in (*_INTS, *_FLOATS):
            cols[name] += [None] * n
        cols["src_file"] += [f.file] * n
        cols["src_line"] += [row[0] for row in f.prefill]
        for line in f.stats:
            values = dict(line.values)
            cols["node"].append(f.node)
            cols["dp_rank"].append(line.engine_index)
            cols["stamp"].append(line.stamp)
            cols["kind"].append(STATS_KIND)
            for name in ("new_seqs", "new_tokens", "cached_tokens"):
                cols[name].append(None)
            for name in _INTS:
                cols[name].append(int(values[name]) if name in values else None)
            for name in _FLOATS:
                cols[name].append(float(values[name]) if name in values else None)
            cols["src_file"].append(f.file)
            cols["src_line"].append(line.src_line)
    return columns_table(cols, SCHEMA)
