"""The README's main job, end to end on the sample incident: every figure against the
simulator's ground truth (its own engine state, not the analysis), and the notification exports
against golden files reviewed by a person."""

from __future__ import annotations

import hashlib
import json

import polars as pl
import pytest
from support.paths import GOLDEN, SAMPLE

TRUTH = SAMPLE / "ground_truth"
SAMPLE_GOLDEN = GOLDEN / "sample_incident"
EXPOSURE_KEYS = [
    "receiver_request_id",
    "leaker_request_id",
    "node",
    "slot_start",
    "slot_count",
    "kind",
    "leaker_pos_min",
    "leaker_pos_max",
    "leaker_part",
]


def _replay() -> bool:
    from forensics.replay import replay_available

    return replay_available()


@pytest.fixture(scope="module")
def out(tmp_path_factory):
    from forensics.cli import run

    out = tmp_path_factory.mktemp("sample") / "out"
    assert run(["investigate", str(SAMPLE), "--out", str(out)]) == 1  # findings exist
    return out


def test_exposures_equal_the_ground_truth(out):
    got = pl.read_parquet(out / "exposures.parquet").select(EXPOSURE_KEYS).sort(EXPOSURE_KEYS)
    want = pl.read_csv(TRUTH / "exposures.csv").select(EXPOSURE_KEYS).sort(EXPOSURE_KEYS)
    assert got.height == want.height > 0
    assert got.to_dicts() == want.to_dicts()


def test_account_lists_equal_the_ground_truth(out):
    want = pl.read_csv(TRUTH / "accounts.csv").sort("side", "account_id")
    for side in ("receiving", "leaking"):
        got = pl.read_csv(out / "notifications" / f"{side}_accounts.csv")
        got = got.select("side", "account_id", "requests", "tokens").sort("account_id")
        assert got.to_dicts() == want.filter(pl.col("side") == side).to_dicts()


def test_affected_requests_equal_the_ground_truth(out):
    got = pl.read_csv(out / "notifications" / "affected_requests.csv")
    for side in ("receiving", "leaking"):
        truth = pl.read_csv(TRUTH / f"{side}_requests.csv")
        truth = truth.filter(pl.col("cross_account_tokens") > 0)
        mine = got.filter(pl.col("side") == side)
        assert sorted(mine["request_id"]) == sorted(truth["request_id"])
        tokens = dict(zip(mine["request_id"], mine["tokens"], strict=True))
        assert tokens == dict(zip(truth["request_id"], truth["cross_account_tokens"], strict=True))


def test_every_receiver_is_confirmed_by_replay(out):
    if not _replay():
        pytest.skip("replay extra not installed: pip install 'kvforensics[replay]'")
    receivers = set(pl.read_csv(TRUTH / "receiving_requests.csv")["request_id"])
    summary = json.loads((out / "manifest.json").read_text())["stages"]["replay"]
    verdicts = {r["request_id"]: r["verdict"] for r in summary["results"]}
    assert {r: verdicts.get(r) for r in receivers} == {r: "confirmed" for r in receivers}


@pytest.mark.parametrize(
    "name", ["receiving_accounts.csv", "leaking_accounts.csv", "affected_requests.csv"]
)
def test_exports_equal_the_reviewed_golden_files(out, name):
    if not _replay():
        pytest.skip("the golden files carry replay's 'confirmed'; install the replay extra")
    got = (out / "notifications" / name).read_bytes()
    want = (SAMPLE_GOLDEN / name).read_bytes()
    assert hashlib.sha256(got).hexdigest() == hashlib.sha256(want).hexdigest(), (
        f"{name} differs from tests/golden/sample_incident/{name}; if the change is intended, "
        "review the new file against data_samples/incident/ground_truth and replace the golden"
    )


def test_exposures_parquet_keeps_utc_instants(out):
    import pandas as pd

    frame = pl.read_parquet(out / "exposures.parquet")
    for column in ("first_read_at", "last_read_at", "first_write_at", "last_write_at"):
        assert frame.schema[column] == pl.Datetime("us", "UTC"), column
    assert frame.schema["slot_count"] == pl.Int64
    pandas_frame = pd.read_parquet(out / "exposures.parquet")
    assert str(pandas_frame["first_read_at"].dtype.tz) == "UTC"


def test_the_manifest_records_the_command_that_ran(out):
    """investigate run from Python (forensics.cli.run, as here under pytest) is recorded as the
    command it ran, not as the arguments of the process that ran it."""
    import json

    want = ["kvforensics", "investigate", str(SAMPLE), "--out", str(out)]
    assert json.loads((out / "manifest.json").read_text())["command"] == want
