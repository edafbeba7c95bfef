"""Evidence only adds (docs/DESIGN.md §4): for simulated cases and random subsets of their
sources (the ledger of some nodes, a stretch of one node's ledger, the engine logs, the
contents), the notification lists made from fewer sources name every account, per side, that
the lists made from all of them name, except what positive evidence recorded in
cleared_findings took off. The oracle is the run with every source, and the simulator's own
ground truth beside it; neither shares the screening's code.

Also: the sample without its ledger lists every true account, and says that no ledger was
provided; a hole in a ledger is found from seq and from the tap's reports."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support.paths import SAMPLE

from forensics.analysis.stage import analyze
from forensics.db import connect
from forensics.ingest.load import ingest_case
from forensics.ledger.default import choose_ledger
from forensics.simulate.run import SimOptions, simulate

SEEDS = (11, 12, 13)


def _lists(case: Path, db: Path) -> tuple[set[tuple[str, str]], set[tuple[str, str]], dict]:
    """(listed (side, account), cleared (side, account), analysis summary) of a case."""
    ingest_case(case, db)
    con = connect(db)
    try:
        summary = analyze(con)
        listed = set(con.execute("SELECT side, account_id FROM affected_accounts").fetchall())
        cleared = set(
            con.execute(
                "SELECT 'receiving', receiver_account_id FROM cleared_findings "
                "WHERE leaker_request_id IS NULL UNION "
                "SELECT 'leaking', leaker_account_id FROM cleared_findings "
                "WHERE leaker_request_id IS NOT NULL"
            ).fetchall()
        )
    finally:
        con.close()
    return listed, cleared, summary


def _truth(case: Path) -> set[tuple[str, str]]:
    truth = pl.read_csv(case / "ground_truth" / "accounts.csv", infer_schema_length=0)
    return {(r["side"], r["account_id"]) for r in truth.iter_rows(named=True)}


@pytest.fixture(scope="module", params=SEEDS)
def full_case(request, tmp_path_factory) -> tuple[Path, set[tuple[str, str]], int]:  # type: ignore[no-untyped-def]
    seed = request.param
    case = tmp_path_factory.mktemp(f"full{seed}") / "case"
    simulate(
        case,
        SimOptions(
            requests=160,
            seed=seed,
            scale=0.001,
            days=1.0,
            contents=True,
            overrides=(("accounts", 40),),
        ),
    )
    listed, _, _ = _lists(case, case.parent / "full.duckdb")
    assert listed == _truth(case)  # with every source, exact
    return case, listed, seed


TAP_RUN = 1_788_000_000 << 32  # the tap's seq: its start second * 2^32 + its event number


def _tap_numbered(part: Path) -> pa.Table:
    """The part's events numbered as the tap numbers them (one run, consecutive)."""
    table = pq.read_table(part)
    i = table.schema.get_field_index("seq")
    return table.set_column(i, "seq", pa.compute.add(table["seq"], TAP_RUN))


def _cut_stretch(part: Path, rng: random.Random) -> None:
    """Remove a random stretch of a ledger part's rows, numbered as the tap numbers them (its
    seq numbers skip over them)."""
    table = _tap_numbered(part)
    n = table.num_rows
    start = rng.randrange(n // 4, 3 * n // 4)
    stop = min(n, start + rng.randrange(50, 2000))
    keep = pa.concat_tables([table.slice(0, start), table.slice(stop)])
    pq.write_table(keep, part)


def _reduce(case: Path, target: Path, rng: random.Random) -> list[str]:
    """A copy of the case with a random subset of its sources removed; what was removed."""
    shutil.copytree(case, target, ignore=shutil.ignore_patterns("ground_truth"))
    removed: list[str] = []
    parts = sorted((target / "kv_events").glob("*.parquet"))
    for part in parts:
        if rng.random() < 0.35:
            part.unlink()
            removed.append(f"ledger of {part.stem}")
    left = [p for p in parts if p.exists()]
    if left and rng.random() < 0.6:
        part = rng.choice(left)
        _cut_stretch(part, rng)
        removed.append(f"a stretch of {part.stem}")
    if rng.random() < 0.4:
        shutil.rmtree(target / "logs")
        removed.append("logs")
    if rng.random() < 0.4:
        (target / "contents.jsonl").unlink()
        removed.append("contents")
    if not removed:
        (target / "kv_events" / parts[0].name).unlink()
        removed.append(f"ledger of {parts[0].stem}")
    return removed


@pytest.mark.parametrize("draw", range(3))
def test_fewer_sources_list_everything_more_sources_list(full_case, draw, tmp_path) -> None:  # type: ignore[no-untyped-def]
    case, full, seed = full_case
    rng = random.Random(seed * 100 + draw)
    reduced = tmp_path / "case"
    removed = _reduce(case, reduced, rng)
    listed, cleared, summary = _lists(reduced, tmp_path / "reduced.duckdb")
    missing = full - listed - cleared
    assert not missing, f"seed {seed} draw {draw}, without {removed}: {sorted(missing)} dropped"
    if any(r.startswith("ledger of decode") for r in removed):
        assert "without a ledger" in summary["headline"]


def test_without_the_ledger_at_all(full_case, tmp_path) -> None:  # type: ignore[no-untyped-def]
    case, full, _ = full_case
    reduced = tmp_path / "case"
    shutil.copytree(case, reduced, ignore=shutil.ignore_patterns("ground_truth", "kv_events"))
    listed, _, summary = _lists(reduced, tmp_path / "reduced.duckdb")
    assert full <= listed
    assert {c for (_s, c) in summary["accounts_by_confidence"].items()} and all(
        k.endswith("possible") for k in summary["accounts_by_confidence"]
    )
    assert "no KV ledger was provided" in summary["headline"]


def test_the_sample_without_its_ledger_lists_every_true_account(tmp_path: Path) -> None:
    case = tmp_path / "case"
    shutil.copytree(SAMPLE, case, ignore=shutil.ignore_patterns("kv_events", "ground_truth"))
    listed, _, summary = _lists(case, tmp_path / "case.duckdb")
    truth = _truth(SAMPLE)
    assert {a for s, a in truth if s == "receiving"} == {
        a for s, a in listed if s == "receiving"
    }  # all 5, and the flagged suspects are all true receivers
    assert {a for s, a in truth if s == "leaking"} <= {a for s, a in listed if s == "leaking"}
    assert summary["evidence_by_node"] == {
        n: "screening" for n in ("decode-0", "decode-1", "prefill-0", "prefill-1")
    }
    assert "no KV ledger was provided" in summary["headline"]
    assert "the ledgers show" not in summary["headline"]
    # what a node without a ledger cannot show is said, not taken for absence
    for node, note in summary["evidence_notes"].items():
        assert "without a ledger only stubs" in note, node
        assert "prefix-cache hash collision" in note and "kvforensics tap" in note, node


def _tap_layout(case: Path, node: str) -> tuple[Path, pa.Table]:
    """Move a node's ledger part into the tap's layout (kv_events/node=NODE/STEM-00001.parquet,
    seq in run 0); the part's path and its table."""
    src = case / "kv_events" / f"{node}-part-00001.parquet"
    table = pq.read_table(src)
    src.unlink()
    folder = case / "kv_events" / f"node={node}"
    folder.mkdir()
    return folder / f"{node}-0000000000-4242-00001.parquet", table


def _stub_read_seq(table: pa.Table, request_prefix: str) -> int:
    con = duckdb.connect()
    con.register("t", table)
    (seq,) = con.execute(
        "SELECT min(seq) FROM t WHERE starts_with(request_id, ?) AND op = 'read'",
        [request_prefix],
    ).fetchone()
    return int(seq)


STUB = "8d0588ef"  # a true receiver of the sample, decoded on decode-1


def _holed_sample(tmp_path: Path) -> tuple[Path, pa.Table, int]:
    case = tmp_path / "case"
    shutil.copytree(SAMPLE, case, ignore=shutil.ignore_patterns("ground_truth"))
    part, table = _tap_layout(case, "decode-1")
    cut = _stub_read_seq(table, STUB) - 2
    pq.write_table(table.filter(pa.compute.less(table["seq"], cut)), part)
    return case, table, cut


def _screened(db: Path) -> tuple[str, bool, list[tuple]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        coverage, covered = con.execute(
            "SELECT coverage, ledger_covered FROM screening WHERE starts_with(request_id, ?)",
            [STUB],
        ).fetchone()
        holes = con.execute(
            "SELECT node, kind, events_lost, source FROM ledger_holes ORDER BY ALL"
        ).fetchall()
        listed = con.execute(
            "SELECT confidence FROM affected_requests "
            "WHERE side = 'receiving' AND starts_with(request_id, ?)",
            [STUB],
        ).fetchall()
    finally:
        con.close()
    return coverage, covered, [*holes, *listed]


def test_a_batch_the_tap_dropped_is_a_hole_and_its_stub_stays_listed(tmp_path: Path) -> None:
    case, table, cut = _holed_sample(tmp_path)
    last = int(pa.compute.max(table["seq"]).as_py())
    (case / "tap").mkdir()
    gap = {
        "ts": 1_788_000_000_000_000,
        "node": "decode-1",
        "kind": "events",
        "dropped": last - cut + 1,
        "first_seq": cut,
        "last_seq": last,
    }
    (case / "tap" / "gaps-decode-1-0000000000-4242.jsonl").write_text(json.dumps(gap) + "\n")
    db = tmp_path / "case.duckdb"
    notes = ingest_case(case, db).notes
    assert any("the tap dropped 1 batch(es)" in n and "decode-1" in n for n in notes)
    db.unlink()
    _, _, summary = _lists(case, db)
    coverage, covered, found = _screened(db)
    assert (coverage, covered) == ("ledger-hole", False)
    assert (
        "decode-1",
        "tap-dropped",
        last - cut + 1,
        "tap/gaps-decode-1-0000000000-4242.jsonl",
    ) in found
    assert ("possible",) in found  # the stub in the hole is still listed
    assert summary["evidence_by_node"]["decode-1"] == "ledger-with-holes"
    assert "decode-1" in summary["evidence_notes"] and "1 known holes" in summary["headline"]


def test_a_tap_stopped_while_writing_leaves_a_hole(tmp_path: Path) -> None:
    case, _, _ = _holed_sample(tmp_path)
    folder = case / "kv_events" / "node=decode-1"
    (folder / "decode-1-0000000000-4242-00002.parquet.tmp").write_bytes(b"PAR1 cut off")
    db = tmp_path / "case.duckdb"
    _lists(case, db)
    coverage, covered, found = _screened(db)
    assert (coverage, covered) == ("ledger-hole", False)
    assert any(f[:2] == ("decode-1", "tap-unfinished") for f in found)
    assert ("possible",) in found


def _lose_before_the_stub(part: Path) -> None:
    """Number the part as the tap does and lose 100 events well before the stub's read: its
    pages' writers may be among them."""
    table = _tap_numbered(part)
    read = _stub_read_seq(table, STUB)
    seq = table["seq"]
    lost = pa.compute.and_(
        pa.compute.greater_equal(seq, read - 400), pa.compute.less(seq, read - 300)
    )
    pq.write_table(table.filter(pa.compute.invert(lost)), part)


def test_a_seq_gap_is_a_hole_for_every_request_after_it(tmp_path: Path) -> None:
    case = tmp_path / "case"
    shutil.copytree(SAMPLE, case, ignore=shutil.ignore_patterns("ground_truth"))
    _lose_before_the_stub(case / "kv_events" / "decode-1-part-00001.parquet")
    db = tmp_path / "case.duckdb"
    _lists(case, db)
    coverage, covered, found = _screened(db)
    assert (coverage, covered) == ("ledger-hole", False)
    assert ("decode-1", "seq-gap", 100, "seq") in found


def test_gaps_in_another_producers_seq_are_no_hole(tmp_path: Path) -> None:
    """Outside the tap's numbering (seq below 2^32) the contract does not promise consecutive
    numbers: a gap there is not a hole, and the lists are the full ledger's."""
    case = tmp_path / "case"
    shutil.copytree(SAMPLE, case, ignore=shutil.ignore_patterns("ground_truth"))
    part = case / "kv_events" / "decode-1-part-00001.parquet"
    table = pq.read_table(part)
    i = table.schema.get_field_index("seq")
    pq.write_table(table.set_column(i, "seq", pa.compute.multiply(table["seq"], 2)), part)
    listed, _, summary = _lists(case, tmp_path / "case.duckdb")
    assert listed == _truth(SAMPLE) and summary["ledger_holes"] == 0


def test_a_seq_numbered_across_nodes_is_no_hole(tmp_path: Path) -> None:
    """A ledger in the tap's numbering whose seq is one counter over several nodes skips numbers
    on each node without losing anything: it is not read as holes, and the evidence note says
    so."""
    case = tmp_path / "case"
    shutil.copytree(SAMPLE, case, ignore=shutil.ignore_patterns("ground_truth"))
    part = case / "kv_events" / "decode-1-part-00001.parquet"
    table = pq.read_table(part)
    i = table.schema.get_field_index("seq")
    tripled = pa.compute.add(pa.compute.multiply(table["seq"], 3), TAP_RUN)
    table = table.set_column(i, "seq", tripled)
    pq.write_table(table, part)
    db = tmp_path / "case.duckdb"
    listed, _, summary = _lists(case, db)
    assert listed == _truth(SAMPLE)
    assert summary["ledger_holes"] == 0
    assert "not one consecutive count" in summary["evidence_notes"]["decode-1"]


def test_damaged_and_hostile_tap_reports_are_quarantined_or_escaped(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    """A tap report with a number past 64 bits or a line that is not JSON is quarantined with
    its reason (never an internal error); a node name with a bidirectional override is shown
    escaped in the ingest warnings."""
    case = tmp_path / "case"
    shutil.copytree(SAMPLE, case, ignore=shutil.ignore_patterns("ground_truth"))
    (case / "tap").mkdir()
    lines = [
        json.dumps(
            {"ts": 1 << 70, "node": "decode-1", "dropped": 3, "first_seq": 1, "last_seq": 3}
        ),
        json.dumps({"node": "\u202eevil", "dropped": 2, "first_seq": 5, "last_seq": 6}),
        "not json",
    ]
    (case / "tap" / "gaps-decode-1-0000000000-1.jsonl").write_text("\n".join(lines) + "\n")
    code, _, err = cli("ingest", case, "--db", tmp_path / "c.duckdb")
    assert code == 1 and "internal error" not in err, err
    assert "\u202e" not in err and "\\u202eevil" in err
    with duckdb.connect(str(tmp_path / "c.duckdb"), read_only=True) as con:
        rows = con.execute(
            "SELECT \"row\" FROM quarantine WHERE table_name = 'tap' ORDER BY 1"
        ).fetchall()
    assert rows == [(1,), (3,)]


def test_a_seq_gap_in_a_ledger_read_in_place_is_a_hole(tmp_path: Path) -> None:
    case = tmp_path / "case"
    shutil.copytree(SAMPLE, case, ignore=shutil.ignore_patterns("ground_truth"))
    for node in ("decode-0", "prefill-0", "prefill-1", "decode-1"):
        part, table = _tap_layout(case, node)  # node folders: read in place by default
        pq.write_table(table, part)
    _lose_before_the_stub(part)
    db = tmp_path / "case.duckdb"
    ledger = choose_ledger(case, None, False, None)
    assert ledger is not None  # the default reads this ledger in place
    ingest_case(case, db, ledger=ledger)
    con = connect(db)
    try:
        analyze(con)
    finally:
        con.close()
    coverage, covered, found = _screened(db)
    assert (coverage, covered) == ("ledger-hole", False)
    assert ("decode-1", "seq-gap", 100, "seq") in found
