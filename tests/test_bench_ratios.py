"""The bench's ratios against the floors, in wall and in CPU seconds (hand-checked values)."""

from __future__ import annotations

from forensics.bench.measure import Measured
from forensics.bench.run import BenchOptions, BenchResult


def _result() -> BenchResult:
    result = BenchResult(BenchOptions(events=1000), events=1000)
    for name, wall, cpu in (
        ("ingest", 9.0, 6.0),
        ("read_floor", 3.0, 1.5),
        ("analyze", 8.0, 5.0),
        ("scan_floor", 2.0, 2.5),
    ):
        result.stages[name] = Measured(name, wall, cpu, 100.0, {})
    return result


def test_ratios_in_wall_and_cpu_seconds() -> None:
    data = _result().to_json()
    assert data["ingest_over_read_floor"] == 3.0
    assert data["analyze_over_floor"] == 4.0
    assert data["ingest_over_read_floor_cpu"] == 4.0
    assert data["analyze_over_floor_cpu"] == 2.0


def test_no_ratio_when_a_floor_failed() -> None:
    result = _result()
    result.stages["scan_floor"] = Measured("scan_floor", 1.0, 0.0, 0.0, {}, "stopped")
    data = result.to_json()
    assert data["analyze_over_floor_cpu"] is None
    assert data["ingest_over_read_floor_cpu"] == 4.0


def test_write_floor_ratios() -> None:
    """The write floor is timed only when asked for; its ratios are ingest over it and it over
    the read floor."""
    assert _result().to_json()["ingest_over_write_floor"] is None
    result = _result()
    result.stages["write_floor"] = Measured("write_floor", 4.5, 3.0, 100.0, {})
    data = result.to_json()
    assert data["write_floor_s"] == 4.5
    assert data["ingest_over_write_floor"] == 2.0
    assert data["ingest_over_write_floor_cpu"] == 2.0
    assert data["write_floor_over_read_floor_cpu"] == 2.0
