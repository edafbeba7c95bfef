"""Chain of custody: the checksum recorded is that of the bytes parsed (a file changed while
ingest reads it stops the ingest, naming it), for loaded files and an external ledger's parts."""

from __future__ import annotations

import shutil
from enum import Enum
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from support.paths import SAMPLE
from support.samples import small_case

from forensics.cli import run


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
        # the same bytes written again, whole (a reader never sees the file half written):
        # its stamp moves
        fresh = part.with_suffix(".rewrite")
        fresh.write_bytes(part.read_bytes())
        fresh.replace(part)
        return found

    monkeypatch.setattr(check, "_check_batch", step)
    db = tmp_path / "c.duckdb"
    code, out, err = cli("ingest", case, "--db", db, "--ledger-external")
    out += err
    assert code == 2, out
    assert "prefill-0-part-00001.parquet" in out and "changed while it was ingested" in out


def linked_part(tmp_path: Path) -> tuple[Path, str]:
    """A hive case whose node=prefill-1 folder holds a link to a part outside the case."""
    case = hive_case(tmp_path)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (part,) = (case / "kv_events" / "node=prefill-1").glob("*.parquet")
    shutil.copy(part, outside / "extra.parquet")
    link = case / "kv_events" / "node=prefill-1" / "prefill-1-part-00002.parquet"
    link.symlink_to(outside / "extra.parquet")
    return case, link.relative_to(case).as_posix()


def ingested(db: Path) -> tuple[set[str], set[str], int, int]:
    """input_files' paths, ledger_files' parts, the rows input_files says were kept, and the
    rows the analysis reads (kv_events, the view over the parts)."""
    import duckdb

    from forensics.db import connect

    con = connect(db)
    try:
        inputs = {r[0] for r in con.execute("SELECT path FROM input_files").fetchall()}
        try:
            ledger = {r[0] for r in con.execute("SELECT rel FROM ledger_files").fetchall()}
        except duckdb.Error:  # a loaded ledger
            ledger = set(inputs)
        kept = con.execute(
            "SELECT sum(rows_loaded) FROM input_files WHERE table_name = 'kv_events'"
        ).fetchall()[0][0]
        seen = con.execute("SELECT count(*) FROM kv_events").fetchall()[0][0]
    finally:
        con.close()
    return inputs, ledger, int(kept), int(seen)


@pytest.mark.parametrize("external", [True, False])
@pytest.mark.parametrize("follow", [False, True])
def test_a_ledgers_link_outside_the_case_is_read_only_when_followed(
    tmp_path: Path, cli: Any, follow: bool, external: bool
) -> None:
    import json

    case, rel = linked_part(tmp_path)
    db = tmp_path / "c.duckdb"
    more = (["--follow-links"] if follow else []) + (["--ledger-external"] if external else [])
    code, out, _ = cli("ingest", case, "--db", db, "--json", *more)
    assert code in (0, 1), out
    result = json.loads(out)
    skipped = {s["path"]: s["why"] for s in result["skipped"]}
    listed = {f["path"] for f in result["files"]}
    inputs, ledger, kept, seen = ingested(db)
    assert kept == seen
    parts = sum(pq.read_metadata(p).num_rows for p in (case / "kv_events").rglob("*.parquet"))
    own = sum(
        pq.read_metadata(p).num_rows
        for p in (case / "kv_events").rglob("*.parquet")
        if not p.is_symlink()
    )
    assert seen == (parts if follow else own) and parts > own
    if follow:
        assert rel in listed and rel in inputs and rel in ledger and rel not in skipped
    else:
        assert "not followed" in skipped[rel]
        assert rel not in listed and rel not in inputs and rel not in ledger


@pytest.fixture(scope="module")
def run_out(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A case (the small incident without ledger) and the OUT investigate wrote for it."""
    root = tmp_path_factory.mktemp("run")
    case = small_case(root)
    out = root / "out"
    assert run(["investigate", str(case), "--out", str(out)]) in (0, 1)
    return case, out


def copied(run_out: tuple[Path, Path], tmp_path: Path) -> tuple[Path, Path]:
    case, out = run_out
    shutil.copytree(case, tmp_path / "case", symlinks=True)
    shutil.copytree(out, tmp_path / "out", symlinks=True)
    return tmp_path / "case", tmp_path / "out"


def test_verify_passes_on_a_fresh_run(run_out: tuple[Path, Path], tmp_path: Path, cli: Any) -> None:
    case, out = copied(run_out, tmp_path)
    code, text, err = cli("verify", out, "--case", case)
    assert code == 0, text + err


def test_verify_refuses_an_output_replaced_by_a_link_to_an_identical_copy(
    run_out: tuple[Path, Path], tmp_path: Path, cli: Any
) -> None:
    case, out = copied(run_out, tmp_path)
    elsewhere = tmp_path / "elsewhere.csv"
    shutil.copy(out / "timeline.csv", elsewhere)
    (out / "timeline.csv").unlink()
    (out / "timeline.csv").symlink_to(elsewhere)
    code, text, err = cli("verify", out, "--case", case)
    text += err
    assert code == 1 and "timeline.csv" in text and "symbolic link" in text, text


def test_verify_refuses_an_output_folder_replaced_by_a_link(
    run_out: tuple[Path, Path], tmp_path: Path, cli: Any
) -> None:
    case, out = copied(run_out, tmp_path)
    shutil.move(out / "notifications", tmp_path / "notifications")
    (out / "notifications").symlink_to(tmp_path / "notifications")
    code, text, err = cli("verify", out, "--case", case)
    text += err
    assert code == 1 and "notifications/" in text and "symbolic link" in text, text


@pytest.mark.parametrize("hostile", ["deep", "huge", "shape", "link"])
def test_a_hostile_manifest_is_refused_with_exit_2(
    run_out: tuple[Path, Path],
    tmp_path: Path,
    cli: Any,
    monkeypatch: pytest.MonkeyPatch,
    hostile: str,
) -> None:
    import forensics.run.outdir as outdir
    import forensics.run.verify as verify

    case, out = copied(run_out, tmp_path)
    manifest = out / "manifest.json"
    if hostile == "deep":
        manifest.write_text('{"outputs": ' + "[" * 200_000 + "]" * 200_000 + "}")
    elif hostile == "huge":
        monkeypatch.setattr(verify, "MANIFEST_MOST", 100)
        monkeypatch.setattr(outdir, "MANIFEST_MOST", 100)
    elif hostile == "shape":
        manifest.write_text('{"outputs": [{"path": ["x"], "sha256": 1, "bytes": "2"}]}')
    else:
        shutil.move(manifest, tmp_path / "manifest.json")
        manifest.symlink_to(tmp_path / "manifest.json")
    code, text, err = cli("verify", out, "--case", case)
    assert code == 2 and "manifest.json" in err and "internal error" not in err + text, err
    code, text, err = cli("investigate", case, "--out", out)  # replaces it: its names are ours
    assert code in (0, 1) and "internal error" not in err + text, err


def test_verify_reports_case_files_added_or_changed_since(
    run_out: tuple[Path, Path], tmp_path: Path, cli: Any
) -> None:
    case, out = copied(run_out, tmp_path)
    (case / "contents.jsonl").write_text("")
    (case / "requests.csv").write_text((case / "requests.csv").read_text() + "\n")
    code, text, err = cli("verify", out, "--case", case)
    flat = " ".join((text + err).split())
    assert code == 1
    assert "contents.jsonl: in the case folder but not in the manifest" in flat
    assert "input requests.csv:" in flat


def numeric_options() -> list[tuple[str, str, list[str]]]:
    """Every int or float option of every command: (command, flag, the arguments it needs)."""
    from forensics.cli.app import command as root

    found = []
    for name, cmd in sorted(root().commands.items()):  # type: ignore[attr-defined]
        needed: list[str] = []
        numeric = []
        for p in cmd.params:
            kind = p.type_descriptor.annotation
            first = (
                next(iter(kind)).value if isinstance(kind, type) and issubclass(kind, Enum) else "x"
            )
            if p.param_type_name == "argument":
                needed.append(first)
            elif p.required:
                needed += [p.opts[0], first]
            if p.param_type_name == "option" and kind in (int, float):
                numeric.append(p.opts[0])
        found += [(name, flag, needed) for flag in numeric]
    return found


NUMERIC = numeric_options()
BAD = ["nan", "inf", "-inf", "-5", "0", "1e18", "1000000000000000000"]


def test_every_numeric_option_is_bounded() -> None:
    from forensics.options import LIMITS

    assert {flag for _, flag, _ in NUMERIC} == set(LIMITS)
    assert len(NUMERIC) >= 12


@pytest.mark.parametrize(("command", "flag", "needed"), NUMERIC)
def test_a_numeric_option_out_of_range_is_refused(
    command: str, flag: str, needed: list[str], cli: Any
) -> None:
    from forensics.options import LIMITS

    bound = LIMITS[flag]
    for value in BAD:
        number = float(value)
        if number == bound.low and bound.low_ok:
            continue  # zero is a value this option takes (--seed 0, --skew-ms 0)
        code, out, err = cli(command, *needed, flag, value)
        text = " ".join((out + err).split())
        assert code == 2, (command, flag, value, text)
        assert flag in text and "Traceback" not in text and "internal error" not in text


@pytest.mark.parametrize("where", ["inside", "same", "holding"])
def test_out_inside_the_case_folder_is_refused(tmp_path: Path, cli: Any, where: str) -> None:
    case = small_case(tmp_path)
    out = {"inside": case / "out", "same": case, "holding": tmp_path}[where]
    before = sorted(p.name for p in case.iterdir())
    code, text, err = cli("investigate", case, "--out", out)
    flat = " ".join((text + err).split())
    assert code == 2 and "outside the case folder" in flat, flat
    assert sorted(p.name for p in case.iterdir()) == before


def test_the_manifest_is_anchored_and_names_examiner_case_host_and_libraries(
    tmp_path: Path, cli: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import hashlib
    import json

    monkeypatch.setenv("KVFORENSICS_EXAMINER", "A. Examiner")
    monkeypatch.setenv("KVFORENSICS_CASE_REF", "TICKET-47")
    case = small_case(tmp_path)
    out = tmp_path / "out"
    code, text, err = cli("investigate", case, "--out", out)
    assert code in (0, 1), err
    digest = hashlib.sha256((out / "manifest.json").read_bytes()).hexdigest()
    assert (out / "manifest.json.sha256").read_text() == f"{digest}  manifest.json\n"
    assert digest in " ".join((text + err).split())
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["custody"]["examiner"] == "A. Examiner"
    assert manifest["custody"]["case_ref"] == "TICKET-47" and manifest["custody"]["host"]
    assert {"duckdb", "polars", "pyarrow", "numpy"} <= set(manifest["environment"]["libraries"])
    assert cli("verify", out, "--case", case)[0] == 0
    # a manifest edited afterwards (its outputs' checksums unchanged) no longer matches its anchor
    manifest["custody"]["examiner"] = "Somebody Else"
    (out / "manifest.json").write_text(json.dumps(manifest))
    code, text, err = cli("verify", out, "--case", case)
    assert code == 1 and "manifest.json.sha256" in " ".join((text + err).split())
    (out / "manifest.json.sha256").unlink()
    code, text, err = cli("verify", out, "--case", case)
    assert code == 1 and "manifest.json.sha256: missing" in " ".join((text + err).split())
