"""The bench's ratios against the floors, in wall and in CPU seconds (hand-checked values)."""

from __future__ import annotations

from forensics.bench.measure import Measured
from forensics.bench.run import BenchOptions, BenchResult, requests_on_power_law


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


def test_requests_on_the_power_law_through_two_pilots() -> None:
    """Pilots on events = 3 * requests^1.4 give the requests of the target exactly; a law
    flatter than one rate per request keeps the second pilot's rate."""

    def law(r: int) -> int:
        return round(3 * r**1.4)

    target = law(50_000)
    assert abs(requests_on_power_law(target, (200, law(200)), (5_000, law(5_000))) - 50_000) <= 2
    # the second pilot's rate alone would ask for more than twice as many
    assert round(target * 5_000 / law(5_000)) > 100_000
    # events per request falling: k is kept at 1, the second pilot's rate
    assert requests_on_power_law(1_000_000, (200, 4_000), (2_000, 20_000)) == 100_000
    # pilots that tell nothing: the rate of the second
    assert requests_on_power_law(1_000, (200, 0), (200, 500)) == 400
