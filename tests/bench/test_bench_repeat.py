"""`kvforensics bench --repeat N` and `--mix both`: repeated stages stand for themselves by
their median run, and the long mix's cost per event over the short's is taken round by round
(hand-checked values, and a real run whose figures are recomputed from its raw run times)."""

from __future__ import annotations

import json

import pytest

from forensics.bench import pair
from forensics.bench.measure import Measured
from forensics.bench.pair import PairResult
from forensics.bench.run import BenchOptions, BenchResult, median_run, run_bench
from forensics.errors import UsageError


def _run(name: str, wall: float, cpu: float = 1.0, error: str | None = None) -> Measured:
    return Measured(name, wall, cpu, 100.0, {}, error)


def test_the_median_run_stands_for_a_repeated_stage() -> None:
    runs = [_run("analyze", s) for s in (5.0, 3.0, 9.0)]
    assert median_run(runs).seconds == 5.0
    assert median_run(runs[:2]).seconds == 3.0  # even count: the quicker middle run
    assert median_run(runs[:1]).seconds == 5.0
    failed = [*runs, _run("analyze", 1.0, error="stopped after 240 s")]
    assert median_run(failed).error == "stopped after 240 s"  # a failure is never hidden


def test_a_result_keeps_every_run_and_reports_the_median() -> None:
    result = BenchResult(BenchOptions(events=1000), events=1000)
    for wall, cpu in ((4.0, 6.0), (2.0, 3.0), (3.0, 5.0)):
        result.record(_run("analyze", wall, cpu))
        result.record(_run("scan_floor", 1.0, 2.0))
    data = result.to_json()
    assert data["repeat"] == 3
    assert data["runs_s"] == {"analyze": [4.0, 2.0, 3.0], "scan_floor": [1.0, 1.0, 1.0]}
    assert data["analyze_s"] == 3.0
    assert data["analyze_over_floor"] == 3.0
    assert data["analyze_over_floor_cpu"] == 2.5  # the CPU of the median run, not of another


def _paired(short_walls: list[float], long_walls: list[float]) -> PairResult:
    short = BenchResult(BenchOptions(events=1000), events=1000)
    long = BenchResult(BenchOptions(events=1000, mix="long"), events=2000)
    for s, lo in zip(short_walls, long_walls, strict=True):
        short.record(_run("analyze", s, cpu=2 * s))
        long.record(_run("analyze", lo, cpu=lo))
    return PairResult(short, long)


def test_the_long_over_short_ratio_is_taken_round_by_round() -> None:
    # per event: short 2/1000, long 5/2000 -> 1.25; then 4/1000 against 12/2000 -> 1.5; a slow
    # round (both runs slow) keeps its ratio: 8/1000 against 18/2000 -> 1.125
    data = _paired([2.0, 4.0, 8.0], [5.0, 12.0, 18.0]).to_json()
    assert data["long_over_short_rounds"] == [1.25, 1.5, 1.125]
    assert data["long_over_short_per_event"] == 1.25
    assert data["long_over_short_per_event_cpu"] == 0.625  # short's CPU is twice its wall
    assert data["repeat"] == 3
    # the ratio of the medians would be (12/2000) / (4/1000) = 1.5: not what is reported
    assert data["short"]["analyze_s"] == 4.0 and data["long"]["analyze_s"] == 12.0


def test_bench_both_mixes_alternating(cli, tmp_path) -> None:
    code, out, err = cli(
        "bench",
        "--events",
        "12000",
        "--mix",
        "both",
        "--repeat",
        "2",
        "--no-naive",
        "--json",
        "--workdir",
        str(tmp_path),
    )
    assert code == 0, err
    data = json.loads(out)
    assert data["mix"] == "both" and data["repeat"] == 2
    short, long = data["short"], data["long"]
    assert (short["mix"], long["mix"]) == ("short", "long")
    for side in (short, long):
        assert 6_000 <= side["events"] <= 24_000, side["events"]
        assert len(side["runs_s"]["analyze"]) == 2 and len(side["runs_s"]["scan_floor"]) == 2
        assert len(side["runs_s"]["read_floor"]) == 1
        assert side["stages"]["analyze"]["result"]["reads"] > 0
        assert side["analyze_s"] == min(side["runs_s"]["analyze"])  # even count: the quicker
    # the rounds' ratios from the raw run times (rounded to the milliseconds JSON keeps)
    expected = [
        (lo / long["events"]) / (sh / short["events"])
        for sh, lo in zip(short["runs_s"]["analyze"], long["runs_s"]["analyze"], strict=True)
    ]
    assert data["long_over_short_rounds"] == pytest.approx(expected, abs=0.01)
    assert not list(tmp_path.iterdir()), "the bench removes its ledgers unless --keep"


def test_bench_repeat_must_be_positive(cli, tmp_path) -> None:
    code, _, err = cli("bench", "--events", "2000", "--repeat", "0", "--workdir", str(tmp_path))
    assert code == 2 and "--repeat 0 is too small: give a number from 1" in err
    with pytest.raises(UsageError, match="--mix must be one of short, long$"):
        run_bench(BenchOptions(mix="both"))


def test_the_mixes_alternate_round_by_round(monkeypatch, tmp_path) -> None:
    """Both ledgers are made first, then each round times the short mix, then the long one."""
    steps: list[tuple[str, str]] = []

    def prepared(options, _root, _progress):  # type: ignore[no-untyped-def]
        steps.append(("prepare", options.mix))
        return BenchResult(options, events=1000)

    def timed_round(result, _root, _progress):  # type: ignore[no-untyped-def]
        steps.append(("round", result.options.mix))
        result.record(_run("analyze", 1.0))

    def finished(result, _root, _progress):  # type: ignore[no-untyped-def]
        steps.append(("finish", result.options.mix))

    for name, stub in (
        ("prepared", prepared),
        ("timed_round", timed_round),
        ("finished", finished),
    ):
        monkeypatch.setattr(pair, name, stub)
    pair.run_pair(BenchOptions(mix="both", repeat=2, workdir=tmp_path))
    assert steps == [
        ("prepare", "short"),
        ("prepare", "long"),
        ("round", "short"),
        ("round", "long"),
        ("round", "short"),
        ("round", "long"),
        ("finish", "short"),
        ("finish", "long"),
    ]
