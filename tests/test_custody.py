"""Chain of custody: the checksum recorded is that of the bytes parsed (a file changed while
ingest reads it stops the ingest, naming it), for loaded files and an external ledger's parts."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from forensics.cli import run

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "data_samples" / "incident"


def small_case(root: Path) -> Path:
    """The sample incident without its ledger, logs and contents (fast to ingest)."""
    case = root / "case"
    case.mkdir()
    for name in ("accounts.csv", "nodes.csv", "requests.csv"):
        shutil.copy(SAMPLE / name, case / name)
    return case


def swapping(target: Path, real: Any, restore: bool = True) -> Any:
    """A stand-in for a parse step that swaps target's bytes (same size) while the real step
    reads it, and restores them afterwards when restore is true."""

    def step(*args: Any, **kwargs: Any) -> Any:
        original = target.read_bytes()
        swapped = original.replace(b"Customer", b"Somebody")  # same size, still valid
        target.write_bytes(swapped if restore else original + b"\n")
        try:
            return real(*args, **kwargs)
        finally:
            if restore:
                target.write_bytes(original)

    return step


@pytest.mark.parametrize("restore", [True, False])
def test_a_file_changed_while_it_is_parsed_stops_the_ingest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Any, restore: bool
) -> None:
    import forensics.ingest.load as load

    case = small_case(tmp_path)
    swap = swapping(case / "accounts.csv", load.stage_file, restore)
    monkeypatch.setattr(load, "stage_file", swap)
    code, out, err = cli("ingest", case, "--db", tmp_path / "c.duckdb")
    out += err
    assert code == 2, out
    assert "accounts.csv" in out and "changed while it was ingested" in out
    assert "internal error" not in out
    assert not (tmp_path / "c.duckdb").exists()


def test_an_unchanged_case_ingests(tmp_path: Path) -> None:
    case = small_case(tmp_path)
    assert run(["ingest", str(case), "--db", str(tmp_path / "c.duckdb")]) in (0, 1)


def hive_case(root: Path) -> Path:
    case = small_case(root)
    for part in sorted((SAMPLE / "kv_events").glob("prefill-*.parquet")):
        node = part.name.split("-part-")[0]
        (case / "kv_events" / f"node={node}").mkdir(parents=True)
        shutil.copy(part, case / "kv_events" / f"node={node}" / part.name)
    return case


def test_an_external_part_rewritten_while_it_is_checked_stops_the_ingest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Any
) -> None:
    import forensics.ledger.check as check

    case = hive_case(tmp_path)
    (part,) = (case / "kv_events" / "node=prefill-0").glob("*.parquet")
    real = check._check_batch

    def step(*args: Any, **kwargs: Any) -> Any:
        found = real(*args, **kwargs)
        part.write_bytes(part.read_bytes())  # the same bytes written again: its stamp moves
        return found

    monkeypatch.setattr(check, "_check_batch", step)
    db = tmp_path / "c.duckdb"
    code, out, err = cli("ingest", case, "--db", db, "--ledger-external")
    out += err
    assert code == 2, out
    assert "prefill-0-part-00001.parquet" in out and "changed while it was ingested" in out
