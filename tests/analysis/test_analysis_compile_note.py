"""The first analysis after an install compiles the sweep's code (a minute or so on 2 cores,
against a third of a second to load it later): when the warm-up runs past COMPILE_NOTE_S, the
analysis says so as a stage of its own, for a loaded ledger and for one kept outside the
database; a quick warm-up says nothing."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from support.samples import hive_sample

from forensics.analysis import order
from forensics.analysis.stage import analyze
from forensics.cli import run
from forensics.db import connect


def _case(tmp_path: Path, external: bool) -> Path:
    case = hive_sample(tmp_path)
    db = tmp_path / "case.duckdb"
    flags = ["--ledger-external"] if external else []
    assert run(["ingest", str(case), "--db", str(db), *flags]) == 0
    return db


def _stages(db: Path) -> list[str]:
    said: list[str] = []
    con = connect(db)
    try:
        analyze(con, progress=lambda what, _done, _total: said.append(what))
    finally:
        con.close()
    return said


@pytest.mark.parametrize("external", [False, True], ids=["loaded", "external"])
def test_a_slow_warm_up_is_said_to_be_compiling(tmp_path, monkeypatch, external) -> None:
    db = _case(tmp_path, external)
    warm_up = order.warm_up

    def slow() -> None:
        time.sleep(1.5)
        warm_up()

    warm_up()  # the compiled code is loaded (or built) in this process: a warm-up is quick now
    monkeypatch.setattr(order, "COMPILE_NOTE_S", 0.5)
    assert order.COMPILE_NOTE not in _stages(db)
    monkeypatch.setattr(order, "warm_up", slow)
    stages = _stages(db)
    assert stages.count(order.COMPILE_NOTE) == 1, stages
    assert stages.index(order.COMPILE_NOTE) < stages.index("aggregate")
