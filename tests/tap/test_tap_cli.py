"""`kvforensics tap ENGINE -- COMMAND`: the command runs with the tap's environment and its exit
status is the tap command's."""

from __future__ import annotations

import sys
from pathlib import Path

from forensics.cli import run
from forensics.tap.launch import SITE


def test_command_gets_the_tap_environment_and_its_status_is_kept(tmp_path: Path) -> None:
    out, seen = tmp_path / "ledger", tmp_path / "env.txt"
    code = (
        "import os, sys; e = os.environ; "
        f"open({str(seen)!r}, 'w').write('|'.join([e['KVFORENSICS_TAP_DIR'], "
        "e['KVFORENSICS_TAP_NODE'], e.get('KVFORENSICS_TAP_CONTENTS', ''), "
        "e['PYTHONPATH'].split(os.pathsep)[0]])); sys.exit(3)"
    )
    argv = [
        "tap",
        "sglang",
        "--dir",
        out,
        "--node",
        "prefill-0",
        "--contents",
        "--",
        sys.executable,
        "-S",
        "-c",
        code,
    ]
    assert run([str(a) for a in argv]) == 3
    assert seen.read_text().split("|") == [str(out.resolve()), "prefill-0", "1", str(SITE)]
    assert out.is_dir()


def test_unknown_engine_and_missing_command_are_usage_errors(tmp_path: Path) -> None:
    assert run(["tap", "tgi", "--dir", str(tmp_path), "--", "true"]) == 2
    assert run(["tap", "vllm", "--dir", str(tmp_path)]) == 2


def test_a_misplaced_option_or_a_missing_server_command_is_a_usage_error(
    tmp_path: Path, capsys
) -> None:
    assert run(["tap", "vllm", "--no-such", "--", "true"]) == 2
    assert "tap has no option --no-such" in " ".join(capsys.readouterr().err.split())
    missing = ["tap", "vllm", "--dir", str(tmp_path), "--", "no-such-server-command-xyz"]
    assert run(missing) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "cannot run the server's command 'no-such-server-command-xyz'" in err
    assert "internal error" not in err
