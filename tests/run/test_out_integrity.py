"""OUT is never a mix of two runs, notice names never collide, and the manifest's checksums
let `kvforensics verify` prove what a run wrote."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from support.outcases import EV, REQ, flat, write_case
from support.paths import REPO

from forensics.notify.notices import file_stems


def _notices(out: Path) -> list[str]:
    folder = out / "notifications" / "notices"
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())


def _run_id(out: Path) -> str:
    return str(json.loads((out / "manifest.json").read_text())["run_id"])


def test_reused_out_keeps_no_stale_notices(cli, tmp_path):
    case, out = tmp_path / "case", tmp_path / "out"
    write_case(case, "acct-2")
    assert cli("investigate", case, "--out", out)[0] == 1
    assert "receiving/acct-2.md" in _notices(out)
    write_case(case, "acct-9")
    assert cli("investigate", case, "--out", out)[0] == 1
    notices = _notices(out)
    assert "receiving/acct-9.md" in notices and not any("acct-2" in n for n in notices)
    assert cli("verify", out)[0] == 0
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out.")]


def test_out_with_foreign_files_is_refused(cli, tmp_path):
    cli = flat(cli)
    case, out = write_case(tmp_path / "case", "acct-2"), tmp_path / "out"
    out.mkdir()
    (out / "my-notes.txt").write_text("keep me")
    code, _, err = cli("investigate", case, "--out", out)
    assert code == 2 and "my-notes.txt" in err
    assert (out / "my-notes.txt").read_text() == "keep me"


def test_out_not_writable(cli, tmp_path):
    import os

    cli = flat(cli)
    case = write_case(tmp_path / "case", "acct-2")
    (tmp_path / "afile").write_text("x")
    code, _, err = cli("investigate", case, "--out", tmp_path / "afile" / "out")
    assert code == 2 and "afile" in err and "Traceback" not in err
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        if os.access(locked, os.W_OK):
            pytest.skip("running as a user who can write anywhere")
        code, _, err = cli("investigate", case, "--out", locked / "out")
        assert code == 2 and "not writable" in err and "Traceback" not in err
    finally:
        locked.chmod(0o700)


KILL_POINTS = {
    "ingest": ("forensics.ingest.load", "_load_file", "after", 2),
    "analysis": ("forensics.analysis.aggregate", "affected_tables", "before", 1),
    "notices": ("forensics.report.stage", "write_notices", "after", 1),
    "swap": ("forensics.run.outdir", "_exchange", "before", 1),
}

KILLER = textwrap.dedent("""
    import importlib, os, signal, sys
    module, name, when, nth = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    mod = importlib.import_module(module)
    real = getattr(mod, name)
    calls = [0]
    def hook(*args, **kwargs):
        calls[0] += 1
        if when == "before" and calls[0] == nth:
            os.kill(os.getpid(), signal.SIGKILL)
        result = real(*args, **kwargs)
        if when == "after" and calls[0] == nth:
            os.kill(os.getpid(), signal.SIGKILL)
        return result
    setattr(mod, name, hook)
    if sys.argv[5] == "no-exchange":
        import forensics.run.outdir as outdir
        outdir._exchange = lambda a, b: False
    from forensics.cli import run
    sys.exit(run(sys.argv[6:]))
""")


def _killed_run(point: tuple[str, str, str, int], mode: str, case: Path, out: Path) -> int:
    module, name, when, nth = point
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            KILLER,
            module,
            name,
            when,
            str(nth),
            mode,
            "investigate",
            str(case),
            "--out",
            str(out),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return proc.returncode


@pytest.mark.parametrize("where", [*KILL_POINTS, "between-renames"])
def test_sigkill_leaves_the_previous_complete_set(cli, tmp_path, where):
    cli = flat(cli)
    case, out = tmp_path / "case", tmp_path / "out"
    write_case(case, "acct-2")
    assert cli("investigate", case, "--out", out)[0] == 1
    before, notices = _run_id(out), _notices(out)
    write_case(case, "acct-9")
    if where == "between-renames":
        point, mode = ("os", "rename", "after", 1), "no-exchange"
    else:
        point, mode = KILL_POINTS[where], "exchange"
    assert _killed_run(point, mode, case, out) == -9
    if where == "between-renames":  # OUT is aside; the next run (or verify after it) puts it back
        assert not out.exists()
        from forensics.run.outdir import recover

        recover(out)
    assert _run_id(out) == before and _notices(out) == notices
    code, _, err = cli("verify", out, "--case", tmp_path / "unused")
    assert "input" in err  # the case folder given is wrong, every output still matches
    assert "output" not in err
    assert cli("investigate", case, "--out", out)[0] == 1  # a clean run afterwards: the new set
    assert "receiving/acct-9.md" in _notices(out) and _run_id(out) != before
    assert cli("verify", out)[0] == 0
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out.")]


def test_verify_lists_every_difference(cli, tmp_path):
    case, out = write_case(tmp_path / "case", "acct-2"), tmp_path / "out"
    assert cli("investigate", case, "--out", out)[0] == 1
    manifest = json.loads((out / "manifest.json").read_text())
    paths = {o["path"] for o in manifest["outputs"]}
    on_disk = {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()}
    assert paths == on_disk - {"manifest.json", "manifest.json.sha256"}
    for o in manifest["outputs"]:
        import hashlib

        data = (out / o["path"]).read_bytes()
        assert o["sha256"] == hashlib.sha256(data).hexdigest() and o["bytes"] == len(data)
    code, out_json, _ = cli("verify", out, "--json")
    assert code == 0 and json.loads(out_json)["ok"] is True
    (out / "timeline.csv").write_text("message\nforged\n")
    (out / "notifications" / "notices" / "receiving" / "acct-2.md").unlink()
    (out / "notifications" / "extra.csv").write_text("x\n")
    (case / "requests.csv").write_text((case / "requests.csv").read_text() + "\n")
    code, out_json, _ = cli("verify", out, "--json")
    found = {(d["side"], d["path"]) for d in json.loads(out_json)["differences"]}
    assert code == 1
    assert found == {
        ("output", "timeline.csv"),
        ("output", "notifications/notices/receiving/acct-2.md"),
        ("output", "notifications/extra.csv"),
        ("input", "requests.csv"),
    }


def test_verify_without_manifest_is_a_usage_error(cli, tmp_path):
    cli = flat(cli)
    code, _, err = cli("verify", tmp_path)
    assert code == 2 and "manifest" in err


def test_unchanged_ingest_still_records_its_queries(cli, tmp_path):
    case, out = write_case(tmp_path / "case", "acct-2"), tmp_path / "out"
    cli("investigate", case, "--out", out)
    first = json.loads((out / "manifest.json").read_text())
    cli("investigate", case, "--out", out)
    second = json.loads((out / "manifest.json").read_text())
    assert second["stages"]["ingest"]["unchanged"] is True
    assert "ingest/validate_requests" in second["queries"]
    assert (
        second["queries"]["ingest/validate_kv_events"]
        == first["queries"]["ingest/validate_kv_events"]
    )


IDS = [
    "acct",
    "ACCT",
    "Acct",
    "CON",
    "con",
    "nul",
    "COM1",
    "LPT9",
    "aux",
    "x-0123456789abcdef",
    "x",
    "x/../y",
    "x\\y",
    ".hidden",
    "a b",
    "a_b",
    "é",
    "",
    "a" * 200,
    "a" * 201,
    "acct-1",
    "acct_1",
    "x-0123456789ABCDEF",
]


def test_notice_stems_are_unique_whatever_the_ids():
    ids = [i for i in IDS if i]
    ids = list(dict.fromkeys([*ids, *(file_stems([i])[i] for i in ids)]))  # and sanitised ones
    stems = file_stems(ids)
    folded = [s.lower() for s in stems.values()]
    assert len(set(folded)) == len(ids)
    for stem in stems.values():
        assert stem.upper().split(".")[0] not in {"CON", "NUL", "AUX", "PRN", "COM1", "LPT9"}
        assert "/" not in stem and "\\" not in stem and not stem.startswith(".")
        assert len(stem) <= 80


def test_case_variant_ids_get_separate_notices(cli, tmp_path):
    """Receivers 'acct' and 'ACCT' (two accounts, equal apart from case) and 'CON': each gets
    its own notice files, distinct even on a case-insensitive file system."""
    case, out = tmp_path / "case", tmp_path / "out"
    case.mkdir()
    (case / "requests.csv").write_text(
        REQ + "A,acct-0,m,2026-08-27T10:00:00Z,200,12\nB,acct,m,2026-08-27T10:00:05Z,200,4\n"
        "C,ACCT,m,2026-08-27T10:00:05Z,200,4\nD,CON,m,2026-08-27T10:00:05Z,200,4\n"
    )
    (case / "kv_events.csv").write_text(
        EV + "2026-08-27T10:00:00Z,n1,A,alloc,0,12,,\n"
        "2026-08-27T10:00:01Z,n1,A,write,0,12,0,prefill\n2026-08-27T10:00:02Z,n1,A,free,0,12,,\n"
        + "".join(
            f"2026-08-27T10:00:05Z,n1,{r},alloc,{s},4,,\n2026-08-27T10:00:06Z,n1,{r},read,"
            f"{s},4,0,\n"
            for r, s in (("B", 0), ("C", 4), ("D", 8))
        )
    )
    code, _, err = cli("investigate", case, "--out", out)
    assert code == 1, err
    receiving = [n for n in _notices(out) if n.startswith("receiving/")]
    assert len({n.lower() for n in receiving}) == len(receiving) == 6
    assert not [n for n in receiving if n.split("/")[1].split(".")[0].upper() == "CON"]


def test_report_command_keeps_no_stale_notices(cli, tmp_path):
    for name, account in (("one", "acct-2"), ("two", "acct-9")):
        case = write_case(tmp_path / f"case-{name}", account)
        assert cli("investigate", case, "--out", tmp_path / name)[0] == 1
    report = tmp_path / "report"
    report.mkdir()
    (report / "keep.txt").write_text("not ours, kept")
    assert cli("report", "--db", tmp_path / "one" / "case.duckdb", "--out", report)[0] == 1
    assert "receiving/acct-2.md" in _notices(report)
    assert cli("report", "--db", tmp_path / "two" / "case.duckdb", "--out", report)[0] == 1
    notices = _notices(report)
    assert "receiving/acct-9.md" in notices and not any("acct-2" in n for n in notices)
    assert (report / "keep.txt").read_text() == "not ours, kept"


def test_names_an_earlier_manifest_lists_are_ours(cli, tmp_path):
    case, out = write_case(tmp_path / "case", "acct-2"), tmp_path / "out"
    assert cli("investigate", case, "--out", out)[0] == 1
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["outputs"].append({"path": "extra-output/x.csv", "sha256": "0" * 64, "bytes": 0})
    (out / "manifest.json").write_text(json.dumps(manifest))
    (out / "extra-output").mkdir()
    (out / "extra-output" / "x.csv").write_text("")
    assert cli("investigate", case, "--out", out)[0] == 1
    assert not (out / "extra-output").exists()


def test_a_killed_runs_staging_is_removed_while_it_is_still_a_zombie(tmp_path):
    """A run killed a moment ago can still hold its pid as an unreaped process; its staging
    folder is a dead run's all the same, and the next run's recovery removes it (before, it
    was taken for a live run's and left beside OUT)."""
    from forensics.run.outdir import STAGING, recover

    child = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = 50
    while Path(f"/proc/{child.pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z":
        deadline -= 1
        assert deadline, "the child never exited"
        time.sleep(0.1)
    out = tmp_path / "out"
    out.mkdir()
    staging = tmp_path / f".out{STAGING}{child.pid}"
    staging.mkdir()
    live = tmp_path / f".out{STAGING}{1}"  # pid 1 is alive
    live.mkdir()
    recover(out)
    child.wait()
    assert not staging.exists()
    assert live.exists()
