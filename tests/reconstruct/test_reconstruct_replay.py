"""Replay decides between explored layouts: on a simulated case (LIFO pool, outputs from the
test model) whose timestamps are deliberately treated as too coarse to order anything, the
pairs that only wrong orders produce are cleared and the simulator's true pairs confirmed; with
outputs sampled (the simulator's mix of temperatures and top-p / top-k), which no greedy replay
reproduces, the most likely layout decides: wrong pairs cleared, no true pair cleared, and
only true pairs confirmed."""

from __future__ import annotations

import shutil
from pathlib import Path

import polars as pl
import pytest

from forensics.analysis.stage import analyze
from forensics.db import connect
from forensics.ingest.load import ingest_case
from forensics.options import Allocator, ReconstructOptions
from forensics.reconstruct.stage import reconstruct
from forensics.replay import replay_available
from forensics.simulate.run import SimOptions, simulate

pytestmark = [
    pytest.mark.skipif(not replay_available(), reason="needs the replay extra"),
    pytest.mark.slow,  # about 40 s of CPU: the simulation's and the layouts' test-model decoding
]


def _rebuilt(tmp_path: Path, sampling: str) -> tuple[Path, object]:
    full = tmp_path / "full"
    simulate(
        full,
        SimOptions(requests=120, seed=11, scale=0.001, days=0.3, model="test", sampling=sampling),
    )
    case = tmp_path / "withheld"
    shutil.copytree(full, case, ignore=shutil.ignore_patterns("kv_events", "ground_truth"))
    ingest_case(case, tmp_path / "case.duckdb")
    return full, connect(tmp_path / "case.duckdb")


def _truth(full: Path) -> set[tuple[str, str]]:
    truth = pl.read_csv(full / "ground_truth" / "exposures.csv")
    return set(zip(truth["receiver_request_id"], truth["leaker_request_id"], strict=True))


def test_sampled_outputs_are_decided_by_the_most_likely_layout(tmp_path: Path) -> None:
    full, con = _rebuilt(tmp_path, "mixed")
    try:
        summary = reconstruct(
            con, ReconstructOptions(allocator=Allocator.LIFO, skew_ms=600_000.0, orders=3)
        )
        rows = con.execute(
            "SELECT receiver_request_id, leaker_request_id, verdict FROM reconstructed_exposures"
        ).fetchall()
        true_pairs = _truth(full)
        assert true_pairs and summary["layouts_replayed"] > 0
        assert not [p for p in true_pairs if (*p, "cleared") in rows]
        assert {(r, lk) for r, lk, v in rows if v == "confirmed"} <= true_pairs
        assert any(v == "confirmed" for *_, v in rows)
        assert any(v == "cleared" and (r, lk) not in true_pairs for r, lk, v in rows)
        contradicted = con.execute(
            "SELECT count(*) FROM reconstructed_requests WHERE contradicted"
        ).fetchone()
        assert contradicted == (0,)
    finally:
        con.close()


def test_replay_confirms_true_pairs_and_clears_the_others(tmp_path: Path) -> None:
    full = tmp_path / "full"
    simulate(
        full,
        SimOptions(requests=120, seed=11, scale=0.001, days=0.3, model="test", sampling="greedy"),
    )
    case = tmp_path / "withheld"
    shutil.copytree(full, case, ignore=shutil.ignore_patterns("kv_events", "ground_truth"))
    ingest_case(case, tmp_path / "case.duckdb")
    con = connect(tmp_path / "case.duckdb")
    try:
        summary = reconstruct(
            con, ReconstructOptions(allocator=Allocator.LIFO, skew_ms=600_000.0, orders=3)
        )
        rows = con.execute(
            "SELECT receiver_request_id, leaker_request_id, verdict, support "
            "FROM reconstructed_exposures"
        ).fetchall()
        truth = pl.read_csv(full / "ground_truth" / "exposures.csv")
        true_pairs = set(zip(truth["receiver_request_id"], truth["leaker_request_id"], strict=True))
        assert true_pairs and summary["layouts_replayed"] > 0
        false_pairs = [(r, v) for r, lk, v, _ in rows if (r, lk) not in true_pairs]
        assert false_pairs, "the coarse clock should let wrong orders add false pairs"
        assert {v for _, v in false_pairs} == {"cleared"}
        assert {(r, lk) for r, lk, v, _ in rows if v == "confirmed"} == true_pairs
        analyze(con)
        listed = {
            r
            for (r,) in con.execute(
                "SELECT request_id FROM affected_requests WHERE side = 'leaking'"
            ).fetchall()
        }
        leakers = {lk for r, lk, v, _ in rows if v == "cleared"} - {lk for _, lk in true_pairs}
        assert not (listed & leakers)  # cleared leakers are not notified
        by_side = dict(
            con.execute(
                "SELECT side, list(DISTINCT confidence ORDER BY confidence) "
                "FROM affected_requests GROUP BY side"
            ).fetchall()
        )
        assert by_side["receiving"] == ["confirmed"]
        # the simulator's LIFO pool is not an engine's allocator: the screening candidates no
        # layout holds are not cleared by it and stay possible, never the cleared ones
        possible = {
            r
            for (r,) in con.execute(
                "SELECT request_id FROM affected_requests WHERE confidence = 'possible'"
            ).fetchall()
        }
        candidates = {
            lk
            for (lk,) in con.execute("SELECT leaker_request_id FROM possible_exposures").fetchall()
        }
        assert possible <= candidates and not (possible & leakers)
    finally:
        con.close()
