"""investigate run again into its own OUT on unchanged inputs does not add a replay run that
repeats the latest one: its verdicts stand and every output equals a fresh folder's. Any change
(inputs, suspects, model, device) makes a new run, kept beside the earlier ones."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import duckdb
import pytest
from support.outcases import write_case
from support.paths import SAMPLE

from forensics.replay import replay_available

pytestmark = pytest.mark.skipif(not replay_available(), reason="replay extra not installed")

# written by every run alike: the run's times, its folder and the case database's file layout
PER_RUN = {"case.duckdb", "manifest.json", "manifest.json.sha256", "report.html"}


def _runs(out: Path) -> list[tuple[str, str]]:
    with duckdb.connect(str(out / "case.duckdb"), read_only=True) as con:
        return con.execute("SELECT run_id, model FROM replay_runs ORDER BY run_id").fetchall()


def _replay_stage(out: Path) -> dict:
    return json.loads((out / "manifest.json").read_text())["stages"]["replay"]


def _files(out: Path) -> dict[str, bytes]:
    return {
        p.relative_to(out).as_posix(): p.read_bytes()
        for p in sorted(out.rglob("*"))
        if p.is_file() and p.relative_to(out).as_posix() not in PER_RUN
    }


def test_a_rerun_on_the_sample_keeps_its_run_and_equals_a_fresh_folder(cli, tmp_path):
    """The sample's 7 suspects, confirmed with the test model: before, a second run into the
    same OUT added run-0002 with the same verdicts, and the timeline and explain pages listed
    both, so they differed from a fresh folder's."""
    first, fresh = tmp_path / "first", tmp_path / "fresh"
    assert cli("investigate", SAMPLE, "--out", first)[0] == 1
    assert cli("investigate", SAMPLE, "--out", fresh)[0] == 1
    code, _, out = cli("investigate", SAMPLE, "--out", first)
    assert code == 1  # the findings stand, confirmed
    assert "are those of run-0001 on unchanged inputs: its verdicts stand (7 confirmed)" in out
    assert _replay_stage(first)["status"] == "repeat"
    assert _runs(first) == [("run-0001", "test")]
    assert _files(first) == _files(fresh) and len(_files(fresh)) > 10
    confirmed = [
        row["confidence"]
        for row in json.loads((first / "notifications" / "receiving_accounts.json").read_text())
    ]
    assert confirmed and set(confirmed) == {"confirmed"}
    # another device is another run, kept beside the first
    code, _, out = cli("investigate", SAMPLE, "--out", first, "--replay-device", "cpu")
    runs = _runs(first)
    if runs == [("run-0001", "test")]:  # 'auto' chose the CPU too: the same run
        assert "are those of run-0001" in out
    else:
        assert runs[-1] == ("run-0002", "test")


def test_changed_inputs_or_model_make_a_new_run(cli, tmp_path):
    case, out = tmp_path / "case", tmp_path / "out"
    write_case(case, "acct-2")
    assert cli("investigate", case, "--out", out)[0] == 1
    assert _runs(out) == [("run-0001", "")]  # no model for 'm': every suspect cannot-replay
    assert cli("investigate", case, "--out", out)[0] == 1
    assert _runs(out) == [("run-0001", "")] and _replay_stage(out)["status"] == "repeat"
    # another model is another run
    model = tmp_path / "model"
    from forensics.replay.testmodel import save_test_model

    save_test_model(model)
    cli("investigate", case, "--out", out, "--replay-model", model)
    assert [r for r, _ in _runs(out)] == ["run-0001", "run-0002"]
    cli("investigate", case, "--out", out, "--replay-model", model)
    assert len(_runs(out)) == 2  # the same folder again: a repeat of run-0002
    # the same folder with other weights is not the same model
    weights = sorted(p for p in model.iterdir() if p.suffix == ".safetensors")
    assert weights
    shutil.copy(weights[0], tmp_path / "w")
    data = bytearray((tmp_path / "w").read_bytes())
    data[-1] ^= 1
    weights[0].write_bytes(bytes(data))
    cli("investigate", case, "--out", out, "--replay-model", model)
    assert len(_runs(out)) == 3
    # changed inputs: a case database loaded anew, replayed anew
    write_case(case, "acct-9")
    assert cli("investigate", case, "--out", out)[0] == 1
    assert _runs(out) == [("run-0001", "")] and "status" not in _replay_stage(out)
