"""The fuzz harness on a few hundred damaged case folders: no traceback, every record counted."""

from __future__ import annotations

import runpy

from conftest import REPO


def test_fuzz_ingest_finds_nothing(capsys):
    fuzz = runpy.run_path(str(REPO / "benchmarks" / "fuzz_ingest.py"), run_name="fuzz")
    failures = fuzz["run_fuzz"](cases=200, seed=12, investigate_every=100, keep=None)
    out = capsys.readouterr().out
    assert failures == 0, out
    assert "200 cases" in out
