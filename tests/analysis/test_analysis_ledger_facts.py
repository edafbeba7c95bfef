"""What screening and the summary know of the ledger comes from the analysis' own pass over it
(temp.analysis_ledger_nodes, temp.analysis_request_nodes), loaded or kept outside the database;
checked against the definitions computed directly on kv_events. One request is received before
its decode node's ledger begins but is logged there: only the 'logged' half covers it."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from support.samples import hive_sample

from forensics.analysis.screening import screen
from forensics.analysis.stage import analyze
from forensics.cli import run
from forensics.db import connect
from forensics.options import ScreeningParams

EARLY = "2026-08-27T00:00:00Z"  # before any ledger event of the sample

NAIVE_COVERED = """
SELECT q.request_id,
       EXISTS (SELECT 1 FROM kv_events e WHERE e.node = q.decode_node
               AND e.ts <= q.received_at)
       AND EXISTS (SELECT 1 FROM kv_events e WHERE e.node = q.decode_node
                   AND e.ts >= q.received_at)
       OR EXISTS (SELECT 1 FROM kv_events e WHERE e.node = q.decode_node
                  AND e.request_id = q.request_id) AS covered
FROM (SELECT DISTINCT request_id, decode_node, received_at FROM requests) q
ORDER BY 1
"""


def early_request(case: Path) -> str:
    """Move the first request's arrival before the ledger begins; returns its id."""
    path = case / "requests.csv"
    with path.open(newline="") as f:
        rows = list(csv.DictReader(f))
    rows[0]["received_at"] = EARLY
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return rows[0]["request_id"]


@pytest.fixture(scope="module", params=["loaded", "external"])
def analysed(request, tmp_path_factory):
    root = tmp_path_factory.mktemp(request.param)
    case = hive_sample(root)
    early = early_request(case)
    db = root / "case.duckdb"
    extra = ["--ledger-external"] if request.param == "external" else []
    assert run(["ingest", str(case), "--db", str(db), *extra]) in (0, 1)
    con = connect(db)
    summary = analyze(con)
    yield con, summary, early
    con.close()


def test_summary_counts_the_ledger_as_kv_events_does(analysed) -> None:
    con, summary, _ = analysed
    reads, events, nodes = con.execute(
        "SELECT count(*) FILTER (WHERE op = 'read'), count(*), count(DISTINCT node) FROM kv_events"
    ).fetchone()
    assert events > 0 and reads > 0 and nodes == 4
    assert (summary["reads"], summary["events"], summary["ledger_nodes"]) == (reads, events, nodes)


def test_ledger_covered_is_the_span_or_the_log(analysed) -> None:
    con, _, early = analysed
    naive = con.execute(NAIVE_COVERED).fetchall()
    got = con.execute("SELECT request_id, ledger_covered FROM screening ORDER BY 1").fetchall()
    assert got == naive
    assert dict(got)[early] is True  # covered by its decode node's log alone
    [(before,)] = con.execute(
        "SELECT $t < min(e.ts) FROM kv_events e JOIN requests q ON q.decode_node = e.node "
        "WHERE q.request_id = $id",
        {"t": EARLY, "id": early},
    ).fetchall()
    assert before


def test_screening_without_the_sweep_scans_the_ledger_itself(analysed) -> None:
    con, _, _ = analysed
    before = con.execute("SELECT * FROM screening ORDER BY request_id").fetchall()
    con.execute("DROP TABLE temp.analysis_ledger_nodes")
    con.execute("DROP TABLE temp.analysis_request_nodes")
    screen(con, ScreeningParams())  # as reconstruct runs it, without an analysis before
    assert con.execute("SELECT * FROM screening ORDER BY request_id").fetchall() == before
