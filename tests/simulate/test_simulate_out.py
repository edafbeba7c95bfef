"""simulate replaces only a folder it wrote itself (one with its ground truth), and in it only
the files it writes: a real case folder given as OUT_DIR (it has kv_events/ too) is refused and
left as it was, a file given as OUT_DIR is a usage error, and a note kept beside a simulated
case (a README) survives a second run while none of the first run's own files does."""

from __future__ import annotations

import hashlib
from pathlib import Path

from support.samples import small_case

ARGS = ("--requests", "5", "--seed", "1", "--scale", "0.0005", "--days", "1")


def _tree(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def test_a_real_case_folder_is_never_replaced(cli, tmp_path) -> None:
    case = small_case(tmp_path)
    (case / "kv_events").mkdir()
    (case / "kv_events" / "node-a.csv").write_text("ts,node,request_id,op,slot_start,slot_count\n")
    before = _tree(case)
    code, _, err = cli("simulate", case, *ARGS)
    text = " ".join(err.split())
    assert code == 2 and "simulate" in text and "Traceback" not in text, text
    assert _tree(case) == before


def test_a_file_as_out_dir_is_a_usage_error(cli, tmp_path) -> None:
    target = tmp_path / "file"
    target.write_text("x")
    code, _, err = cli("simulate", target, *ARGS)
    text = " ".join(err.split())
    assert code == 2 and "is a file" in text and "Traceback" not in text, text
    assert target.read_text() == "x"


def test_a_second_run_replaces_its_own_files_and_keeps_a_note(cli, tmp_path) -> None:
    out = tmp_path / "sim"
    assert cli("simulate", out, *ARGS)[0] == 0
    first = _tree(out)
    (out / "README.md").write_text("notes on the drill")
    (out / "kv_events" / "stale-part-00001.parquet").write_bytes(b"left by an earlier run")
    assert cli("simulate", out, *ARGS)[0] == 0
    after = _tree(out)
    assert (out / "README.md").read_text() == "notes on the drill"
    assert {k: v for k, v in after.items() if k != "README.md"} == first


def test_a_run_without_truth_can_be_rerun_into_its_folder(cli, tmp_path) -> None:
    out = tmp_path / "sim"
    assert cli("simulate", out, *ARGS, "--no-truth")[0] == 0
    first = _tree(out)
    assert "ground_truth/summary.json" in first
    assert cli("simulate", out, *ARGS, "--no-truth")[0] == 0
    assert _tree(out) == first


def test_a_run_stopped_half_way_is_replaced_by_the_next(cli, tmp_path) -> None:
    """A run killed after it started writing leaves its mark, not its summary: the next run
    still knows the folder as simulate's and replaces what the first left."""
    from forensics.simulate.run import prepare

    out = tmp_path / "sim"
    prepare(out)
    (out / "requests.csv").write_text("request_id,account_id\nr1,")  # cut mid-row
    assert not (out / "ground_truth" / "summary.json").exists()
    code, _, err = cli("simulate", out, *ARGS)
    assert code == 0, err
    assert (out / "ground_truth" / "summary.json").is_file()
    assert not (out / "ground_truth" / ".simulating").exists()
    assert (out / "requests.csv").read_text().count("\n") == 6  # header and 5 requests
