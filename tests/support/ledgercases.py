"""Ledger cases in the tap's layout shared by the ledger areas' tests: a hive sample split into
parts with every kind of damage (check_case), decode-0 split into a typed and a text part
(split_decode0), and the queries that compare what the check recorded with the loaded ledger."""

from __future__ import annotations

from datetime import timedelta, timezone
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from support.samples import hive_sample

LOADED = """
SELECT src_file, count(*), count(seq), max(slot_start + slot_count),
       min(input_order) % 1099511627776, max(input_order) % 1099511627776,
       count(*) FILTER (WHERE op = 'read'), count(*) FILTER (WHERE op IN ('alloc', 'share')),
       min(ts), max(ts)
FROM kv_events GROUP BY src_file ORDER BY src_file
"""
RECORDED = """
SELECT rel, events, with_seq, slot_end_max, key_min % 1099511627776, key_max % 1099511627776,
       reads, acquisitions, first_ts, last_ts
FROM ledger_files ORDER BY rel
"""

HOSTILE_ID = "=HYPERLINK(\"http://x\",'o''k')\u3000"  # a formula, quotes, an ideographic space
PLUS9 = timezone(timedelta(hours=9))


def split_parts(case: Path, node: str, bounds: list[int]) -> list[Path]:
    """The node's one part written as parts cut at `bounds` (rows), named so that path order is
    row order; one name holds a quote and a non-ASCII letter."""
    folder = case / "kv_events" / f"node={node}"
    (part,) = folder.glob("*.parquet")
    table = pq.read_table(part)
    part.unlink()
    cuts = [0, *bounds, table.num_rows]
    paths = []
    for i, (lo, hi) in enumerate(zip(cuts, cuts[1:], strict=False)):
        name = f"{node}-part-{i:03d}" + ("-l'été" if i == 4 else "") + ".parquet"
        pq.write_table(table.slice(lo, hi - lo), folder / name)
        paths.append(folder / name)
    return paths


def set_values(path: Path, rows: list[int] | None, column: str, value: object) -> None:
    """Set column to value on the given rows of the part (None: every row)."""
    table = pq.read_table(path)
    values = table[column].to_pylist()
    for r in range(len(values)) if rows is None else rows:
        values[r] = value
    index = table.schema.get_field_index(column)
    pq.write_table(table.set_column(index, column, pa.array(values, table[column].type)), path)


def column_as_text(path: Path, column: str, bad_row: int) -> None:
    """The part with `column` as text (another schema), one value of it not a number."""
    table = pq.read_table(path)
    text = pc.cast(table[column], pa.string()).to_pylist()
    text[bad_row] = "twelve"
    index = table.schema.get_field_index(column)
    pq.write_table(table.set_column(index, column, pa.array(text, pa.string())), path)


def check_case(root: Path) -> Path:
    """The hive sample with decode-0 in 9 parts: quarantined rows in two parts, a part whose
    every row is quarantined, an empty part, a part of another schema (slot_start as text, one
    value not a number), a request id no request has (a formula with quotes), two requests
    left out of the request log (warned of in each part that names them); decode-1 in 2."""
    case = hive_sample(root)
    parts = split_parts(case, "decode-0", [5000, 12000, 12100, 12100, 20000, 30000, 41000, 50000])
    set_values(parts[1], [3, 77], "slot_count", 0)
    set_values(parts[2], None, "slot_count", 0)  # every row quarantined
    assert pq.read_metadata(parts[3]).num_rows == 0
    column_as_text(parts[5], "slot_start", 9)
    set_values(parts[6], [0], "op", "evict")
    set_values(parts[7], [11, 12], "request_id", HOSTILE_ID)
    split_parts(case, "decode-1", [20000])
    lines = (case / "requests.csv").read_text().splitlines(keepends=True)
    (case / "requests.csv").write_text("".join(lines[:1] + lines[3:]))
    return case


def as_text(table: pa.Table) -> pa.Table:
    """The part as a CSV-like export writes it: timestamps as text with a +09:00 offset, numbers
    as text (some with blanks around them), ids with blanks around them."""
    out = {}
    for name in table.column_names:
        values = table[name].to_pylist()
        if name == "ts":
            out[name] = [v.astimezone(PLUS9).isoformat() if v else None for v in values]
        elif name in ("seq", "slot_start", "slot_count", "pos_start"):
            out[name] = [
                None if v is None else f" {v} " if i % 3 else str(v) for i, v in enumerate(values)
            ]
        elif name == "request_id":
            out[name] = [None if v is None else f"  {v} " for v in values]
        else:
            out[name] = values
    return pa.table({k: pa.array(v, pa.string()) for k, v in out.items()})


def split_decode0(case: Path) -> tuple[Path, Path]:
    """decode-0's part split in two: the first half typed, the second as text, with bad rows in
    each (a slot_count 0 in the typed part; a timestamp that is no timestamp, one with an offset
    beyond 14:00 and one without an offset in the text part)."""
    folder = case / "kv_events" / "node=decode-0"
    (part,) = folder.glob("*.parquet")
    table = pq.read_table(part)
    part.unlink()
    half = table.num_rows // 2
    typed, text = table.slice(0, half), as_text(table.slice(half))
    counts = typed["slot_count"].to_pylist()
    counts[4] = 0
    typed = typed.set_column(
        typed.schema.get_field_index("slot_count"), "slot_count", pa.array(counts, pa.int64())
    )
    ts = text["ts"].to_pylist()
    ts[3] = "yesterday"
    ts[5] = "2026-08-27T09:00:00+15:00"
    ts[8] = "2026-08-27T09:00:00"
    text = text.set_column(0, "ts", pa.array(ts, pa.string()))
    first, second = folder / "decode-0-part-00001.parquet", folder / "decode-0-part-00002.parquet"
    pq.write_table(typed, first)
    pq.write_table(text, second)
    return first, second
