"""The stages of investigate as one typed list: what each StageResult says against what the run
left on disk (the case database, the files under OUT, manifest.json)."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest
from support.paths import EXAMPLES

from forensics.context import RunContext, StageResult
from forensics.run.investigate import InvestigateOptions, InvestigateResult, investigate
from forensics.run.pipeline import STAGES, StageSpec, run_stage


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[InvestigateResult, Path]:
    out = tmp_path_factory.mktemp("pipeline") / "out"
    result = investigate(EXAMPLES / "semantics-seq", out, InvestigateOptions(replay_device="cpu"))
    return result, out


def test_every_stage_ran_once_in_order(run: tuple[InvestigateResult, Path]) -> None:
    result, _ = run
    assert list(result.results) == [spec.name for spec in STAGES]
    assert all(isinstance(r, StageResult) for r in result.results.values())


def test_findings_agree_with_the_manifest_summaries(run: tuple[InvestigateResult, Path]) -> None:
    """The exit code's rule as the summaries state it: a stage's own `findings`, or ingest's
    quarantined rows."""
    result, out = run
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    stages = manifest["stages"]
    assert set(stages) == set(result.results)  # the manifest sorts its keys
    for name, stage in result.results.items():
        summary = stages[name]
        expected = bool(summary.get("findings")) or bool(summary.get("rows_quarantined"))
        assert stage.findings == expected, name
        assert stage.headline == summary.get("headline", ""), name
    assert result.findings  # the example holds exposures
    assert result.results["analyze"].findings and result.results["export"].findings


def test_tables_named_by_each_stage_are_in_the_case_database(
    run: tuple[InvestigateResult, Path],
) -> None:
    result, out = run
    con = duckdb.connect(str(out / "case.duckdb"), read_only=True)
    try:
        present = {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
    finally:
        con.close()
    for name, stage in result.results.items():
        assert set(stage.tables) <= present, (name, set(stage.tables) - present)
    tables = result.results
    assert {"requests", "kv_events", "nodes", "accounts", "quarantine"} <= set(
        tables["ingest"].tables
    )
    assert {"exposures", "violations", "affected_accounts"} <= set(tables["analyze"].tables)
    assert "reconstructed_exposures" in tables["reconstruct"].tables
    assert tables["export"].tables == ()


def test_files_named_by_the_stages_are_the_outputs(run: tuple[InvestigateResult, Path]) -> None:
    """Every file under OUT (as manifest.json lists them) is a file a stage named, or lies in a
    folder a stage named; and each stage names what it writes."""
    result, out = run
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    written = {p.relative_to(out).as_posix() for p in result.written}
    for entry in manifest["outputs"]:
        path = entry["path"]
        assert path in written or any(path.startswith(w + "/") for w in written), path
    files = {name: {p.name for p in stage.files} for name, stage in result.results.items()}
    assert files["ingest"] == {"quarantine.csv"}
    assert files["analyze"] == {"exposures.parquet"}
    assert {"report.html", "timeline.csv", "notices"} <= files["export"]
    assert all(p.exists() for p in result.written)


def test_run_stage_records_the_result_and_its_files(tmp_path: Path) -> None:
    seen: list[tuple[str, int, int | None]] = []

    def fake(ctx: RunContext) -> StageResult:
        path = ctx.out_dir / "x.txt"
        path.write_text("x", encoding="utf-8")
        return StageResult({"n": 1}, headline="one x", findings=True, files=(path,))

    con = duckdb.connect(":memory:")
    ctx = RunContext(tmp_path, tmp_path, con, progress=lambda *a: seen.append(a))
    result = run_stage(StageSpec("fake", fake, "writes x.txt"), ctx)
    con.close()
    assert seen == [("fake", 0, None)]
    assert ctx.results == {"fake": result} and ctx.summaries() == {"fake": {"n": 1}}
    assert ctx.written == [tmp_path / "x.txt"]
