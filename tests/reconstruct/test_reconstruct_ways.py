"""Which kept runs make an SGLang node's lists (forensics/reconstruct/ways.py), by hand: the
release's way's where the node names one and its runs were kept, else every kept run; and a
rebuild stopped by an option a node cannot take leaves the rebuild before it in place."""

from __future__ import annotations

import shutil

import pytest
from support.engines import engines_dir
from support.paths import SAMPLE

from forensics.db import connect
from forensics.errors import UsageError
from forensics.ingest.load import ingest_case
from forensics.options import FreeList, ReconstructOptions
from forensics.reconstruct.stage import reconstruct
from forensics.reconstruct.ways import chosen, listed_runs

KEPT = ["staged", "front", "staged", "front"]


def test_the_releases_way_makes_the_lists_and_the_rest_is_followed():
    choice = chosen(FreeList.VERSION, "sglang", ("0.5.9", FreeList.STAGED), "decode")
    assert choice.explored is FreeList.ANY and choice.listed == "staged"
    assert "SGLang 0.5.9 builds a decode node's allocator" in choice.note
    taken = listed_runs(KEPT, choice, "0.5.9")
    assert taken.runs == [0, 2] and taken.way == "staged" and taken.note == ""


def test_a_release_whose_way_the_log_dropped_is_listed_over_every_kept_way():
    choice = chosen(FreeList.VERSION, "sglang", ("0.4.9", FreeList.FRONT), "decode")
    taken = listed_runs(["staged", "staged"], choice, "0.4.9")
    assert taken.runs == [0, 1] and taken.way is None
    assert "as SGLang 0.4.9 builds (front) fit the log worse" in taken.note


def test_no_release_or_a_stated_way_lists_every_run_followed():
    for version in (None, "sglang-0.5.9"):
        choice = chosen(FreeList.VERSION, "sglang", (version, None), "decode")
        assert choice.explored is FreeList.ANY and choice.listed is None
        assert "no SGLang release named for this node" in choice.note
        assert listed_runs(KEPT, choice, version) == ([0, 1, 2, 3], None, "")
    for stated in (FreeList.ANY, FreeList.FRONT):
        choice = chosen(stated, "sglang", ("0.5.9", FreeList.STAGED), "decode")
        assert (choice.explored, choice.listed, choice.note) == (stated, None, "")
    # another engine's node: the option is not an SGLang one
    assert chosen(FreeList.VERSION, "vllm", ("0.32.0", None), "unified").listed is None


def test_a_run_stopped_by_an_error_keeps_the_tables_of_the_run_before(tmp_path, monkeypatch):
    """The bundled sample without its ledger or contents, rebuilt, then rebuilt again told a free
    list its 16-token pages cannot have (back): the second run stops with the reason, and the
    first run's rebuilt tables stand, not emptied ones beside its analysis."""
    monkeypatch.setenv("KVFORENSICS_ENGINES_VENV", str(engines_dir()))
    case = tmp_path / "case"
    shutil.copytree(SAMPLE, case, ignore=shutil.ignore_patterns("kv_events", "contents.jsonl"))
    ingest_case(case, tmp_path / "case.duckdb")
    con = connect(tmp_path / "case.duckdb")
    reconstruct(con)
    before = _counts(con)
    assert before[0] > 0 and before[1] > 0
    with pytest.raises(UsageError, match="--sglang-free-list back"):
        reconstruct(con, ReconstructOptions(free_list=FreeList.BACK))
    assert _counts(con) == before
    con.close()


def _counts(con) -> tuple[int, ...]:
    tables = ("reconstructed_nodes", "reconstructed_exposures", "reconstructed_events")
    return tuple(con.execute(f"SELECT count(*) FROM {t}").fetchall()[0][0] for t in tables)
