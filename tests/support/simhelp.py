"""Test helpers for the simulator: read a case folder's ledger, and a deliberately naive
per-slot oracle of the exposure semantics (dicts and Python loops, one slot at a time), written
independently of forensics.simulate.truth to check its ground truth."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from forensics.simulate.run import SimOptions

OP_RANK = {"free": 0, "alloc": 1, "share": 2, "write": 3, "read": 4}


def _ts_us(col: pa.ChunkedArray) -> list[int]:
    if pa.types.is_timestamp(col.type):
        return col.cast(pa.timestamp("us", tz="UTC")).cast(pa.int64()).to_pylist()
    return (
        pl.Series(col.to_pylist())
        .str.to_datetime(time_unit="us", time_zone="UTC")
        .dt.epoch("us")
        .to_list()
    )


def read_ledger(case: Path) -> pl.DataFrame:
    """Every kv_events row of a simulated case (Parquet parts), with ts in microseconds and
    input_order (files sorted by path, rows in file order)."""
    frames = []
    offset = 0
    for path in sorted((case / "kv_events").rglob("*.parquet")):
        t = pq.read_table(path)
        df = pl.from_arrow(t.drop(["ts"])).with_columns(
            ts=pl.Series(_ts_us(t["ts"]), dtype=pl.Int64),
            input_order=pl.int_range(offset, offset + t.num_rows, eager=False),
        )
        offset += t.num_rows
        frames.append(df)
    return pl.concat(frames, how="diagonal_relaxed")


def ordered(df: pl.DataFrame) -> pl.DataFrame:
    """Events per node in the docs/DESIGN.md §3 order."""
    df = df.with_columns(rank=pl.col("op").replace_strict(OP_RANK, return_dtype=pl.Int8))
    if "seq" in df.columns and df["seq"].null_count() == 0:
        return df.sort(["node", "seq", "input_order"])
    return df.sort(["node", "ts", "rank", "input_order"])


def naive_truth(df: pl.DataFrame) -> tuple[set, set]:
    """Slot-by-slot semantics: ({(R, W, node, kind, slot)}, {(R, node, violation, other, slot)})."""
    exposures, violations = set(), set()
    last: dict = {}
    holds: dict = defaultdict(dict)  # (node, slot) -> {rid: (kind, order, hash)}
    ever: set = set()
    for order, e in enumerate(ordered(df).iter_rows(named=True)):
        node, r, op = e["node"], e["request_id"], e["op"]
        for k in range(e["slot_count"]):
            s = (node, e["slot_start"] + k)
            holders = holds[s]
            others = [q for q in holders if q != r] or [None]
            if op == "alloc":
                for q in holders:
                    if q != r:
                        violations.add((r, node, "double-allocation", q, s[1]))
                holders[r] = ("alloc", order, None)
                ever.add((r, s))
            elif op == "share":
                holders[r] = ("share", order, e["content_hash"])
                ever.add((r, s))
            elif op == "free":
                holders.pop(r, None)
            elif op == "write":
                if r not in holders:
                    kind = "write-after-free" if (r, s) in ever else "write-unheld"
                    for q in others:
                        violations.add((r, node, kind, q, s[1]))
                last[s] = (r, order, e["content_hash"])
            elif op == "read":
                if r not in holders:
                    for q in others:
                        violations.add((r, node, "read-unheld", q, s[1]))
                if s not in last or last[s][0] == r:
                    continue
                w, w_order, w_hash = last[s]
                mine = holders.get(r)
                if mine and mine[0] == "share" and mine[1] > w_order:
                    if mine[2] is None or w_hash is None or mine[2] == w_hash:
                        continue
                    kind = "prefix-mismatch"
                elif (mine and w_order > mine[1]) or w in holders:
                    kind = "overwritten"
                else:
                    kind = "stale"
                exposures.add((r, w, node, kind, s[1]))
    return exposures, violations


def coalesce(rows: set, key_len: int) -> set:
    """Maximal contiguous slot runs: rows are (*key, slot); returns {(*key, start, count)}."""
    by_key = defaultdict(list)
    for row in rows:
        by_key[row[:key_len]].append(row[key_len])
    out = set()
    for key, slots in by_key.items():
        slots.sort()
        start = prev = slots[0]
        for s in slots[1:] + [None]:
            if s is not None and s == prev + 1:
                prev = s
                continue
            out.add((*key, start, prev - start + 1))
            if s is not None:
                start = prev = s
    return out


def load_json(path: Path) -> dict:
    return json.loads(path.read_text())


def engine_truth(df: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Run the simulator's per-slot ground-truth state (forensics.simulate.truth) over any
    ledger frame; returns (exposures, violations) as the simulator writes them."""
    import numpy as np

    from forensics.simulate import ledger as L
    from forensics.simulate import truth_tables as T
    from forensics.simulate.truth import NodeState, Pieces, apply

    df = ordered(df)
    ids = sorted(set(df["request_id"]))
    nodes = sorted(set(df["node"]))
    hashes = sorted(h for h in set(df["content_hash"]) if h is not None)
    src_codes = {s: i for i, s in enumerate(L.SOURCES) if s}
    pieces = Pieces()
    for k, node in enumerate(nodes):
        part = df.filter(pl.col("node") == node)
        cols = {
            "op": part["op"].replace_strict({o: i for i, o in enumerate(L.OPS)}).to_numpy(),
            "rid": part["request_id"].replace_strict({r: i for i, r in enumerate(ids)}).to_numpy(),
            "start": part["slot_start"].to_numpy(),
            "count": part["slot_count"].to_numpy(),
            "seq": np.arange(1, part.height + 1),
            "ts": part["ts"].to_numpy(),
            "pos": part["pos_start"].fill_null(-1).to_numpy(),
            "src": part["source"].replace_strict(src_codes, default=0).to_numpy(),
            "hash": part["content_hash"]
            .replace_strict({h: i for i, h in enumerate(hashes)}, default=-1)
            .to_numpy(),
        }
        size = int((part["slot_start"] + part["slot_count"]).max())
        apply(NodeState(k, size, pieces), cols, slice(0, part.height))
    slots = T.exposure_slots(pieces)
    exp = T.exposures(slots, ids, nodes, ids) if slots.height else slots
    return exp, T.violations(pieces, ids, nodes)


def sglang_sim_options() -> SimOptions:
    """A simulated case on SGLang's real allocator (500 requests, 300 accounts) with stubs
    whose reads reconstruction rebuilds: shared by the reconstruction tests."""
    return SimOptions(
        requests=500,
        seed=5,
        scale=0.001,
        days=1.0,
        allocator="sglang",
        contents=False,
        overrides=(("accounts", 300),),
    )
