"""Fetching a node's events in their total order (forensics.analysis.fetch): every path gives
the order of a plain two-key sort (numpy's lexsort on (rank, key), the oracle), and a case
whose ledger is out of order, whose keys are not dense or do not fit int32 gives exactly the
tables of the same ledger in order."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from forensics.analysis import order
from forensics.analysis.fetch import NodeEvents, NodeInfo, events_of
from forensics.analysis.stage import analyze
from forensics.analysis.sweep import cells_of
from forensics.case.discover import discover
from forensics.db import connect
from forensics.ingest.load import ingest_into
from forensics.simulate.run import SimOptions, simulate

# -- events_of on batches made here ---------------------------------------------------------------


def _node(rank: np.ndarray, key: np.ndarray, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    n = len(rank)
    start = rng.integers(0, 5000, n)
    return {
        "rank": rank.astype(np.int64),
        "event_key": key.astype(np.int64),
        "op_code": rng.integers(0, 5, n).astype(np.int8),
        "req_code": rng.integers(0, 50, n).astype(np.int32),
        "slot_start": start.astype(np.int64),
        "slot_end": (start + rng.integers(0, 40, n)).astype(np.int64),
        "hash_code": rng.integers(-1, 30, n).astype(np.int32),
    }


def _batches(cols: dict[str, np.ndarray], arrival: np.ndarray, size: int) -> list[pa.RecordBatch]:
    table = pa.table({name: values[arrival] for name, values in cols.items()})
    return table.to_batches(max_chunksize=size)


def _fetched(cols: dict[str, np.ndarray], arrival: np.ndarray, size: int = 7) -> NodeEvents:
    key = cols["event_key"]
    lo, hi = int(key.min()), int(key.max())
    files = tuple(  # the node's keys in each file, as queries/analysis/nodes.sql gives them
        (int(key[key >> 40 == f].min()), int(key[key >> 40 == f].max()))
        for f in np.unique(key >> 40)
    )
    info = NodeInfo("n", len(key), True, int(cols["slot_end"].max()), lo, hi, files=files)
    oracle = np.lexsort((key, cols["rank"]))
    asked: list[bool] = []

    def batches(ordered: bool) -> list[pa.RecordBatch]:
        asked.append(ordered)
        return _batches(cols, oracle if ordered else arrival, size)

    ev = events_of(info, batches)
    assert asked == [False, True][: len(ev.fetches)]
    assert ev.keys(np.arange(len(key))).tolist() == key[oracle].tolist()
    for name, got in (
        ("req_code", ev.req),
        ("op_code", ev.op),
        ("hash_code", ev.content_hash),
        ("slot_start", ev.slots[0]),
        ("slot_end", ev.slots[1]),
    ):
        assert got.tolist() == cols[name][oracle].tolist(), name
    return ev


def _blocks(rng: np.random.Generator, n: int) -> np.ndarray:
    """0 .. n - 1 in shuffled blocks, as DuckDB's threads hand a table's rows out."""
    cuts = np.sort(rng.choice(np.arange(1, n), size=min(n - 1, 6), replace=False))
    blocks = np.split(np.arange(n), cuts)
    return np.concatenate([blocks[i] for i in rng.permutation(len(blocks))])


@pytest.mark.parametrize("seed", range(8))
def test_dense_keys_in_rank_order_are_placed_by_key_in_any_arrival(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(20, 300))
    key = 1_000 + np.arange(n)
    rank = np.sort(rng.integers(0, n // 2, n))  # ties: the key decides
    for arrival in (np.arange(n), _blocks(rng, n)):
        ev = _fetched(_node(rank, key, seed), arrival)
        assert ev.fetches == ["by key"] and ev.key is None
    # one event at a time in no order: more stretches than are noted, so DuckDB sorts
    assert _fetched(_node(rank, key, seed), rng.permutation(n)).fetches[0] == "by key"


@pytest.mark.parametrize("seed", range(4))
def test_keys_dense_in_each_of_several_files_are_placed_by_key(seed: int) -> None:
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 80, 4)
    key = np.concatenate(
        [(f << 40) + 1 + np.arange(s) for f, s in zip((1, 2, 5, 6), sizes, strict=True)]
    )
    n = len(key)
    rank = np.sort(rng.integers(0, n, n))
    for arrival in (np.arange(n), _blocks(rng, n)):
        ev = _fetched(_node(rank, key, seed), arrival)
        assert ev.fetches == ["by key"] and ev.key is None
    # out of rank order: DuckDB sorts, and the keys are held by place (int32)
    ev = _fetched(_node(rng.permutation(rank), key, seed), _blocks(rng, n))
    assert ev.fetches == ["by key", "sorted"]
    assert ev.key is not None and ev.key.dtype == np.int32


@pytest.mark.parametrize("seed", range(8))
def test_dense_keys_out_of_rank_order_are_sorted_by_duckdb(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(20, 300))
    key = np.arange(n) + (1 << 40)
    rank = rng.integers(0, n, n)  # no relation to the key
    for arrival in (np.arange(n), _blocks(rng, n), rng.permutation(n)):
        ev = _fetched(_node(rank, key, seed), arrival)
        assert ev.fetches == ["by key", "sorted"]
        assert ev.key is not None and ev.key.dtype == np.int32


def test_a_rank_that_falls_only_where_two_stretches_meet_is_caught() -> None:
    # keys 0..9; places 0-4 have ranks 10-14 and places 5-9 ranks 0-4: each stretch of
    # consecutive keys ascends, so only the seam between them shows that key order is wrong
    key = np.arange(10)
    rank = np.concatenate([np.arange(10, 15), np.arange(5)])
    arrival = np.concatenate([np.arange(5, 10), np.arange(5)])
    for size in (5, 3, 10):
        assert _fetched(_node(rank, key, 0), arrival, size).fetches == ["by key", "sorted"]


@pytest.mark.parametrize("seed", range(6))
def test_keys_with_gaps_are_sorted_with_their_rank(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(20, 300))
    for key, dtype in (
        (np.sort(rng.choice(10 * n, n, replace=False)), np.int32),
        (np.sort(rng.choice(10 * n, n, replace=False)) << 30, np.int64),  # spans > 2**31
    ):
        for rank in (np.sort(rng.integers(0, n, n)), rng.integers(0, n, n)):
            ev = _fetched(_node(rank, key, seed), _blocks(rng, n))
            assert ev.fetches == ["ranked"] and ev.key is not None and ev.key.dtype == dtype


# -- whole analyses of a case changed so that the same events take each path -------------------

TABLES = {
    "exposures": "SELECT * EXCLUDE (confidence) FROM exposures ORDER BY ALL",
    "violations": "SELECT * FROM violations ORDER BY ALL",
    "read_stats": "SELECT * FROM read_stats ORDER BY ALL",
}

# New keys for each node's events: every one keeps the order of events with the same rank
# (so the total order, and every table, stays the same), while the ledger comes out of order,
# with gaps or beyond int32.
REKEY = {
    "reversed": "k0 + row_number() OVER (PARTITION BY node ORDER BY rank_ DESC, input_order) - 1",
    "gaps": "k0 + 3 * (input_order - k0)",
    "wide": "input_order + CASE WHEN input_order - k0 >= n / 2 THEN 68719476736 ELSE 0 END",
}
PATHS = {"as is": ["by key"], "reversed": ["by key", "sorted"], "gaps": ["ranked"]}
PATHS["wide"] = ["ranked"]


@pytest.fixture(scope="module")
def ledger(tmp_path_factory) -> Path:
    case = tmp_path_factory.mktemp("fetch") / "case"
    opts = SimOptions(
        requests=400,
        seed=5,
        scale=0.02,
        truth=False,
        contents=False,
        bugs=frozenset({"oversize-stub", "late-transfer"}),
    )
    simulate(case, opts)
    return case


@pytest.fixture(scope="module")
def loaded(ledger, tmp_path_factory) -> Path:
    db = tmp_path_factory.mktemp("fetchdb") / "case.duckdb"
    con = connect(db)
    try:
        ingest_into(con, ledger, discover(ledger))
    finally:
        con.close()
    return db


def _rekeyed(db: Path, rekey: str | None, by_seq: bool, rank: str, tmp: Path) -> Path:
    out = tmp / "case.duckdb"
    shutil.copy(db, out)
    con = connect(out)
    try:
        if not by_seq:
            con.execute("UPDATE kv_events SET seq = NULL")
        if rekey is not None:
            con.execute(
                "CREATE TEMP TABLE k AS WITH e AS (SELECT input_order, node, "
                f"{rank} AS rank_, min(input_order) OVER (PARTITION BY node) AS k0, "
                "count(*) OVER (PARTITION BY node) AS n FROM kv_events "
                "JOIN (VALUES ('free', 0), ('alloc', 1), ('share', 2), ('write', 3), "
                "('read', 4)) AS o(op, op_rank) USING (op)) "
                f"SELECT input_order, {REKEY[rekey]} AS new_key FROM e"
            )
            con.execute(
                "UPDATE kv_events e SET input_order = k.new_key FROM k "
                "WHERE k.input_order = e.input_order"
            )
    finally:
        con.close()
    return out


def _analysed(db: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[dict, set[tuple[str, ...]]]:
    paths: set[tuple[str, ...]] = set()
    fetch = order.events_of

    def noted(*args, **kwargs) -> NodeEvents:
        ev = fetch(*args, **kwargs)
        paths.add(tuple(ev.fetches))
        return ev

    monkeypatch.setattr(order, "events_of", noted)
    con = connect(db)
    try:
        analyze(con)
        return {name: con.execute(q).fetchall() for name, q in TABLES.items()}, paths
    finally:
        con.close()


@pytest.mark.parametrize("by_seq", [True, False], ids=["by seq", "by ts"])
def test_every_path_gives_the_tables_of_the_ledger_in_order(
    loaded, tmp_path, monkeypatch, by_seq
) -> None:
    rank = "seq" if by_seq else "epoch_us(ts) * 8 + op_rank"
    expected, paths = _analysed(_rekeyed(loaded, None, by_seq, rank, tmp_path), monkeypatch)
    assert paths == {tuple(PATHS["as is"])}
    assert expected["exposures"], "the scenario must produce exposures"
    for rekey in REKEY:
        folder = tmp_path / rekey
        folder.mkdir()
        got, paths = _analysed(_rekeyed(loaded, rekey, by_seq, rank, folder), monkeypatch)
        assert paths == {tuple(PATHS[rekey])}, rekey
        assert got == expected, rekey


@pytest.mark.parametrize("seed", range(10))
def test_cells_made_in_place_are_the_distinct_range_ends(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 500))
    lo = int(rng.choice([0, 7, 10**6]))
    start = rng.integers(lo, lo + int(rng.choice([10, 1000, 10**5])), n).astype(np.int32)
    end = (start + rng.integers(0, 60, n)).astype(np.int32)
    bounds = np.unique(np.concatenate([start, end]))  # the oracle: sort and search
    c0, c1 = np.searchsorted(bounds, start), np.searchsorted(bounds, end)
    cells = cells_of(start, end, in_place=True)
    assert cells.c0 is start and cells.c1 is end  # made in their own arrays
    assert cells.bounds.tolist() == bounds.tolist()
    assert cells.c0.tolist() == c0.tolist() and cells.c1.tolist() == c1.tolist()
