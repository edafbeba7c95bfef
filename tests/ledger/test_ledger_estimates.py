"""DuckDB plans a scan of several Parquet parts from its first part's rows times the number of
parts. A node whose first parts are small (an engine started mid-minute, its tap closing a part
a minute) and whose later parts are large looks tiny to it: it then built its join's hash table
on the node's events instead of the request codes, handed the events back in no order at all,
and the sorted refetch ran out of the task's memory. The view splits such a run of parts so that
each scan's first part is not far smaller than the scan's mean part, and the analysis of such a
node fetches its events in key order, with the loaded ledger's tables."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest
from support.cases import query
from support.samples import differences, hive_sample

from forensics.analysis import order
from forensics.cli import run
from forensics.ledger.external import LedgerFile
from forensics.ledger.view import PartView, groups, named_groups


def parts(rows: list[int], node: str = "decode-0", rank: int = 0) -> list[PartView]:
    return [
        PartView(LedgerFile(f"/{node}/{i}", f"{node}/{i}", node, rank + i), (), False, False, r)
        for i, r in enumerate(rows)
    ]


def planned(scan: list[PartView]) -> int:
    """What DuckDB plans a scan of these parts to hold."""
    return scan[0].rows * len(scan)


@pytest.mark.parametrize(
    "rows",
    [
        [3, 3, 50_000, 3, 3],
        [1] * 20 + [1_000_000] + [1] * 20,
        [10 * 2**i for i in range(18)],
        list(range(1, 2001)),
        [0, 0, 500, 0],
        [7, 1_000_000, 7, 1_000_000, 7],
    ],
    ids=["small-large-small", "one-burst", "doubling", "ramp", "empty-parts", "alternating"],
)
def test_each_scan_is_planned_near_its_rows(rows) -> None:
    scans = groups(parts(rows))
    assert [p for s in scans for p in s] == parts(rows)  # every part once, in rank order
    for s in scans:  # a part read alone is planned exactly
        assert len(s) == 1 or planned(s) * 4 >= sum(p.rows for p in s), s
    assert len(scans) <= 2 * len(rows).bit_length()


def test_the_named_views_scans_are_planned_near_their_rows() -> None:
    rows = [3, 3, 50_000, 3, 3, 200_000, 3, 3, 40_000]
    scans = named_groups(parts(rows), alone=frozenset({5}))
    assert sorted(p.file.rank for s in scans for p in s) == list(range(len(rows)))
    assert [5] in [[p.file.rank for p in s] for s in scans]
    for s in scans:
        assert len(s) == 1 or planned(s) * 4 >= sum(p.rows for p in s), s


@pytest.mark.parametrize(
    "rows", [[267] * 2000, [1_000_000] * 5 + [12], [1_000_000, 400_000, 900_000, 1_000]]
)
def test_parts_of_like_sizes_stay_in_one_scan(rows) -> None:
    assert len(groups(parts(rows))) == 1


def test_parts_of_unknown_size_stay_in_one_scan() -> None:
    assert len(groups(parts([0] * 50))) == 1


def small_first(case: Path, node: str, small: int) -> None:
    """The node's ledger as five parts: `small` rows, `small` rows, the bulk, `small`, `small`."""
    (part,) = (case / "kv_events" / f"node={node}").glob("*.parquet")
    table = pq.read_table(part)
    part.unlink()
    n = table.num_rows
    cuts = [0, small, 2 * small, n - 2 * small, n - small, n]
    for i, (a, b) in enumerate(zip(cuts, cuts[1:], strict=False)):
        pq.write_table(table.slice(a, b - a), part.parent / f"{node}-part-{i:05d}.parquet")


def test_a_node_whose_first_parts_are_small_is_fetched_in_key_order(tmp_path, monkeypatch) -> None:
    case = hive_sample(tmp_path)
    small_first(case, "decode-0", 3)
    loaded = tmp_path / "loaded.duckdb"
    assert run(["ingest", str(case), "--db", str(loaded), "--ledger-load"]) == 0
    assert run(["analyze", "--db", str(loaded)]) == 1
    fetched: dict[str, list[str]] = {}
    load_within = order.load_within

    def noted(con, info, budget):  # type: ignore[no-untyped-def]
        ev, held = load_within(con, info, budget)
        fetched[info.node] = list(ev.fetches)
        return ev, held

    monkeypatch.setattr("forensics.analysis.order.load_within", noted)
    db = tmp_path / "external.duckdb"
    assert run(["ingest", str(case), "--db", str(db), "--ledger-external"]) == 0
    assert query(db, "SELECT count(*) FROM ledger_files WHERE node = 'decode-0'") == [(5,)]
    assert run(["analyze", "--db", str(db), "--workers", "1"]) == 1
    assert fetched["decode-0"] == ["by key"]
    assert set(fetched) == {"decode-0", "decode-1", "prefill-0", "prefill-1"}
    assert differences(loaded, db) == {}
