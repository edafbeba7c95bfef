"""One run at a time writes an OUT folder: a second `investigate` or `report` into the same
OUT while the first runs stops at once (exit 2, naming the first run) and leaves the first
run's result whole; the lock dies with its run, however it ends."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from support.outcases import flat, write_case
from support.paths import REPO

# Run `investigate` and stop it in the analysis until the file named by argv[1] exists.
PAUSED = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    import forensics.analysis.aggregate as aggregate
    go, reached = Path(sys.argv[1]), Path(sys.argv[2])
    real = aggregate.affected_tables
    def paused(*args, **kwargs):
        reached.write_text("reached")
        for _ in range(600):
            if go.exists():
                break
            time.sleep(0.1)
        return real(*args, **kwargs)
    aggregate.affected_tables = paused
    from forensics.cli import run
    sys.exit(run(sys.argv[3:]))
""")

HOLDER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from forensics.run.outdir import held
    with held(Path(sys.argv[1])):
        print("held", flush=True)
        time.sleep(120)
""")


def _wait_for(path: Path, proc: subprocess.Popen[str]) -> None:
    for _ in range(1200):
        if path.exists():
            return
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.1)
    raise AssertionError(f"{path} never appeared")


def test_a_second_run_into_the_same_out_stops_and_the_first_finishes_whole(cli, tmp_path):
    cli = flat(cli)
    case, out = write_case(tmp_path / "case", "acct-2"), tmp_path / "out"
    go, reached = tmp_path / "go", tmp_path / "reached"
    assert cli("investigate", case, "--out", tmp_path / "other")[0] == 1  # a database to report
    first = subprocess.Popen(
        [sys.executable, "-c", PAUSED, str(go), str(reached), "investigate", str(case),
         "--out", str(out)],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        _wait_for(reached, first)
        code, _, err = cli("investigate", case, "--out", out)
        assert code == 2 and "Traceback" not in err
        assert f"being written by another kvforensics run (pid {first.pid}," in err
        assert "wait for it to finish, or give another folder" in err
        code, _, err = cli("report", "--db", tmp_path / "other" / "case.duckdb", "--out", out)
        assert code == 2 and f"pid {first.pid}" in err
        go.write_text("go")
        assert first.wait(timeout=300) == 1, first.communicate()
    finally:
        first.kill()
        first.communicate()
    assert json.loads((out / "manifest.json").read_text())["outputs"]
    assert cli("verify", out)[0] == 0  # the first run's set, whole
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".out.")] == []


def test_a_killed_holder_leaves_the_out_free(cli, tmp_path):
    cli = flat(cli)
    case, out = write_case(tmp_path / "case", "acct-2"), tmp_path / "out"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(out)], cwd=REPO, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        code, _, err = cli("investigate", case, "--out", out)
        assert code == 2 and f"pid {holder.pid}, started " in err
        assert not out.exists()
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait()
    assert (tmp_path / ".out.kvf-lock").exists()  # a kill cannot remove it, and need not
    assert cli("investigate", case, "--out", out)[0] == 1
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".out.")] == []
    assert cli("investigate", case, "--out", out)[0] == 1  # and again, the lock given back


def test_a_link_to_out_is_held_with_it(cli, tmp_path):
    cli = flat(cli)
    case, out = write_case(tmp_path / "case", "acct-2"), tmp_path / "real" / "out"
    assert cli("investigate", case, "--out", out)[0] == 1
    link = tmp_path / "link"
    link.symlink_to(out, target_is_directory=True)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(out)], cwd=REPO, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        for command in ("investigate", "report"):
            args = [case] if command == "investigate" else ["--db", out / "case.duckdb"]
            code, _, err = cli(command, *args, "--out", link)
            assert code == 2 and f"pid {holder.pid}" in err, (command, err)
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait()
    assert cli("report", "--db", out / "case.duckdb", "--out", link)[0] in (0, 1)


def test_a_file_system_without_locks_runs_unlocked(cli, tmp_path, monkeypatch):
    """Some network mounts refuse flock (ENOLCK): the run goes on, as where there are no locks."""
    import errno
    import fcntl

    def refuse(*_args):
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(fcntl, "flock", refuse)
    cli = flat(cli)
    case, out = write_case(tmp_path / "case", "acct-2"), tmp_path / "out"
    assert cli("investigate", case, "--out", out)[0] == 1
    assert cli("verify", out)[0] == 0
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".out.")] == []


@pytest.mark.parametrize("command", ["investigate", "report"])
def test_an_out_name_too_long_for_its_lock_is_refused_clearly(cli, tmp_path, command):
    cli = flat(cli)
    case = write_case(tmp_path / "case", "acct-2")
    out = tmp_path / ("o" * 250)  # a valid name; the lock's name beside it is not
    args = [case] if command == "investigate" else ["--db", tmp_path / "none.duckdb"]
    if command == "report":
        assert cli("investigate", case, "--out", tmp_path / "first")[0] == 1
        args = ["--db", tmp_path / "first" / "case.duckdb"]
    code, _, err = cli(command, *args, "--out", out)
    assert code == 2 and "Traceback" not in err and "internal error" not in err
    assert "beside --out" in err and "File name too long" in err


def test_spill_folders_a_killed_run_left_in_out_do_not_make_it_foreign(cli, tmp_path):
    cli = flat(cli)
    case, out = write_case(tmp_path / "case", "acct-2"), tmp_path / "out"
    assert cli("investigate", case, "--out", out)[0] == 1
    for name in ("case.duckdb.tmp", "case.duckdb.kvforensics-spill-4242-0a1b2c3d"):
        (out / name).mkdir()
        (out / name / "duckdb_temp_storage-0.tmp").write_bytes(b"\0" * 64)
    (out / "case.duckdb.tmpx").write_text("not a spill")
    code, _, err = cli("investigate", case, "--out", out)
    assert code == 2 and "case.duckdb.tmpx" in err and "spill-4242" not in err
    (out / "case.duckdb.tmpx").unlink()
    assert cli("investigate", case, "--out", out)[0] == 1
    assert not [p for p in out.iterdir() if p.name.startswith("case.duckdb.t")]  # swapped away
    assert not [p for p in out.iterdir() if "spill" in p.name]
