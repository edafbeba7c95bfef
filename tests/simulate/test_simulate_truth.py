"""The simulator's ground truth against independent oracles: the hand-worked examples of the
semantics, and a naive slot-by-slot implementation over simulated ledgers with every bug on."""

from __future__ import annotations

import csv

import polars as pl
import pytest
from support.paths import EXAMPLES
from support.simhelp import coalesce, engine_truth, naive_truth, read_ledger

from forensics.simulate.config import BUGS
from forensics.simulate.run import SimOptions, simulate


def _example_ledger(folder):
    frames, offset = [], 0
    files = (
        [folder / "kv_events.csv"]
        if (folder / "kv_events.csv").exists()
        else sorted((folder / "kv_events").iterdir())
    )
    for path in files:
        df = (
            pl.read_csv(path, infer_schema_length=0)
            if path.suffix == ".csv"
            else pl.read_ndjson(path).cast(pl.String)
        )
        df = df.with_columns(input_order=pl.int_range(offset, offset + df.height))
        offset += df.height
        frames.append(df)
    df = pl.concat(frames, how="diagonal_relaxed")
    ts = df["ts"]
    as_us = ts.str.to_integer(strict=False)
    iso = ts.str.to_datetime(time_zone="UTC", time_unit="us", strict=False).dt.epoch("us")
    df = df.with_columns(ts=as_us.fill_null(iso))
    for col in ("seq", "slot_start", "slot_count", "pos_start"):
        if col in df.columns:
            df = df.with_columns(pl.col(col).cast(pl.Int64))
    for col in ("seq", "source", "content_hash"):
        if col not in df.columns:
            df = df.with_columns(pl.lit(None, pl.String if col != "seq" else pl.Int64).alias(col))
    return df.with_columns(
        pl.col("source").replace("", None), pl.col("content_hash").replace("", None)
    )


def _expected(folder, name, cols):
    with (folder / name).open() as fh:
        return {tuple(row[c] for c in cols) for row in csv.DictReader(fh)}


EXP_COLS = ["receiver_request_id", "leaker_request_id", "node", "slot_start", "slot_count", "kind"]
VIO_COLS = ["request_id", "node", "slot_start", "slot_count", "violation", "other_request_id"]


def _as_set(df, cols):
    return {tuple("" if v is None else str(v) for v in row) for row in df.select(cols).rows()}


@pytest.mark.parametrize("name", ["semantics-seq", "semantics-ties"])
def test_truth_state_reproduces_the_worked_examples(name):
    folder = EXAMPLES / name
    exp, vio = engine_truth(_example_ledger(folder))
    assert _as_set(exp, EXP_COLS) == _expected(folder, "expected_exposures.csv", EXP_COLS)
    assert _as_set(vio, VIO_COLS) == _expected(folder, "expected_violations.csv", VIO_COLS)


@pytest.mark.parametrize("name", ["semantics-seq", "semantics-ties"])
def test_naive_oracle_reproduces_the_worked_examples(name):
    folder = EXAMPLES / name
    exposures, violations = naive_truth(_example_ledger(folder))
    got = {tuple(map(str, r)) for r in coalesce(exposures, 4)}
    want = {
        (r, w, n, s, c, k)
        for r, w, n, s, c, k in _expected(folder, "expected_exposures.csv", EXP_COLS)
    }
    assert {(r, w, n, s, c, k) for r, w, n, k, s, c in got} == want
    got_v = {
        (r, n, s, c, v, "" if o is None else o) for r, n, v, o, s, c in coalesce(violations, 4)
    }
    want_v = {
        (r, n, int(s), int(c), v, o)
        for r, n, s, c, v, o in _expected(folder, "expected_violations.csv", VIO_COLS)
    }
    assert got_v == want_v


@pytest.fixture(scope="module")
def all_bugs(tmp_path_factory):
    out = tmp_path_factory.mktemp("allbugs") / "case"
    rates = (
        ("long_share", 0.12),
        ("double_alloc_rate", 0.2),
        ("late_transfer_rate", 0.2),
        ("prefix_collision_rate", 0.3),
    )
    simulate(
        out,
        SimOptions(
            requests=160, seed=11, scale=0.0005, bugs=frozenset(BUGS), days=0.001, overrides=rates
        ),
    )
    return out


def test_ground_truth_equals_naive_oracle_with_every_bug(all_bugs):
    exposures, violations = naive_truth(read_ledger(all_bugs))
    want = {(r, w, n, k, s, c) for r, w, n, k, s, c in coalesce(exposures, 4)}
    got = pl.read_csv(all_bugs / "ground_truth" / "exposures.csv")
    assert {(r, w, n, k, s, c) for r, w, n, s, c, k in got.select(EXP_COLS).rows()} == want
    want_v = {(r, n, v, o, s, c) for r, n, v, o, s, c in coalesce(violations, 4)}
    got_v = pl.read_csv(all_bugs / "ground_truth" / "violations.csv")
    assert {(r, n, v, o, s, c) for r, n, s, c, v, o in got_v.select(VIO_COLS).rows()} == want_v
    # the scenario exercises every kind the bugs can cause
    assert {k for *_, k, _, _ in want} == {"overwritten", "stale", "prefix-mismatch"}
    assert {v for _, _, v, *_ in want_v} == {"write-after-free", "double-allocation"}


def test_accounts_follow_the_token_definition(all_bugs):
    exposures, _ = naive_truth(read_ledger(all_bugs))
    req = pl.read_csv(all_bugs / "requests.csv").select("request_id", "account_id")
    acct = dict(req.rows())
    pairs = {(r, n, s, w) for r, w, n, _, s in exposures if acct[r] != acct[w]}
    want: set = set()
    for side, who in (("receiving", 0), ("leaking", 3)):
        per: dict = {}
        for p in pairs:
            a = acct[p[who]]
            reqs, toks = per.get(a, (set(), 0))
            per[a] = (reqs | {p[who]}, toks + 1)
        want.update({(side, a, len(r), t) for a, (r, t) in per.items()})
    got = pl.read_csv(all_bugs / "ground_truth" / "accounts.csv")
    assert set(got.rows()) == want and want
