"""The default free list on the bundled sample without its ledger: the lists take the way the
SGLang release in nodes.csv builds for a decode node. The sample's simulator hands out the most
recently freed page first, as SGLang's paged allocator did before 0.4.9.post4, and its nodes
table names such a release. Named a release that stages its frees instead, the lists would take
runs the engine never made; replay weighs the other way's layouts too, and the leaks it
reproduces there are listed on that evidence: every true leaking account stays listed."""

from __future__ import annotations

import shutil

import polars as pl
import pytest
from support.engines import engines_dir
from support.paths import SAMPLE

from forensics.analysis.stage import analyze
from forensics.db import connect
from forensics.ingest.load import ingest_case
from forensics.reconstruct.stage import reconstruct
from forensics.replay import replay_available

pytestmark = pytest.mark.skipif(not replay_available(), reason="needs the replay extra")


def _true_leaking() -> set[str]:
    truth = pl.read_csv(SAMPLE / "ground_truth" / "accounts.csv")
    return set(truth.filter(pl.col("side") == "leaking")["account_id"])


@pytest.mark.parametrize("release", ["0.4.9", "0.5.19"])
def test_replay_keeps_leaks_the_named_releases_way_did_not_read(tmp_path, monkeypatch, release):
    monkeypatch.setenv("KVFORENSICS_ENGINES_VENV", str(engines_dir()))
    case = tmp_path / "case"
    shutil.copytree(SAMPLE, case, ignore=shutil.ignore_patterns("kv_events", "ground_truth"))
    nodes = (case / "nodes.csv").read_text()
    assert ",sglang,0.4.9," in nodes
    (case / "nodes.csv").write_text(nodes.replace(",sglang,0.4.9,", f",sglang,{release},"))
    ingest_case(case, tmp_path / "case.duckdb")
    con = connect(tmp_path / "case.duckdb")
    analyze(con)
    summary = reconstruct(con)
    analyze(con)
    listed = {
        a
        for (a,) in con.execute(
            "SELECT account_id FROM affected_accounts WHERE side = 'leaking'"
        ).fetchall()
    }
    front_only = con.execute(
        "SELECT count(*) FILTER (verdict = 'confirmed'), count(*) FROM reconstructed_exposures "
        "WHERE cross_account AND free_lists = ['front']"
    ).fetchall()[0]
    apart = con.execute("SELECT count(*) FROM reconstructed_other_ways").fetchall()[0][0]
    con.close()
    assert summary["release_free_list"] == ("front" if release == "0.4.9" else "staged")
    assert _true_leaking() <= listed
    if release == "0.5.19":
        # listed only because replay reproduced the delivered output from the front way's
        # layout; nothing the front way read is left undecided
        assert front_only[0] > 0 and front_only[0] == front_only[1]
        assert apart == 0
