"""A case no test has seen: a simulated fleet of 12 engine nodes with all four engine bugs, from
a new seed at every run (KVF_SEED gives one back; a failure names it). `investigate` with the
ledger loaded on this machine, and with the ledger in a real S3 server on 127.0.0.1 (moto's)
checked and swept by a real two-node Ray cluster, must write the same files (but the three that
record how the run was made) and the same tables, and both must equal the simulator's ground
truth (taken from its engine state, not from the analysis). Minutes long: `pytest -m slow`."""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

pytest.importorskip("s3fs")
pytest.importorskip("moto")
pytest.importorskip("ray")

from support.raycluster import cluster_env, local_cluster  # noqa: E402
from support.s3 import BUCKET, s3_server  # noqa: E402
from support.s3 import s3_store as _store  # noqa: E402
from support.simtruth import ACCOUNT, BUGS, EXPOSURE, VIOLATION  # noqa: E402
from support.simtruth import got as _got  # noqa: E402
from support.simtruth import truth as _truth  # noqa: E402

from forensics.options import SimOptions  # noqa: E402
from forensics.simulate.run import simulate  # noqa: E402

pytestmark = pytest.mark.slow

SEED = int(os.environ.get("KVF_SEED") or secrets.randbelow(10**9))
NODES = (("prefill_nodes", 5), ("decode_nodes", 7))
RATES = (("late_transfer_rate", 0.05), ("double_alloc_rate", 0.05), ("prefix_collision_rate", 0.05))
# What records how a run was made (its command line, the ledger's location, the time; the
# manifest's own hash): the only files in OUT that may differ between the two runs.
HOW_RUN = {"case.duckdb", "manifest.json", "manifest.json.sha256", "report.html"}
# A request's explain page says what its node's ledger was checked for; read from a remote
# store it is not checked for seq gaps, and the page says so. Nothing else may differ there.
REMOTE_NOTE = re.compile(r"; its ledger is read from a remote store, where seq gaps are not[^<]*")
LISTS = (
    "exposures.parquet",
    "timeline.csv",
    "notifications/receiving_accounts.csv",
    "notifications/leaking_accounts.csv",
)
TABLES = (
    "exposures",
    "violations",
    "exposure_tokens",
    "read_stats",
    "affected_requests",
    "affected_accounts",
)


def _investigate(env: dict[str, str], *args: object) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "forensics", "investigate", *map(str, args)],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert done.returncode == 1, f"seed {SEED}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("unseen")
    case = root / "case"
    simulate(
        case,
        SimOptions(requests=800, seed=SEED, bugs=frozenset(BUGS), overrides=(*NODES, *RATES)),
    )
    here, there = root / "here", root / "there"
    _investigate({}, case, "--out", here)
    with s3_server(root / "s3.log") as s3:
        store = _store(s3)
        store.mkdir(BUCKET)
        ledger = f"s3://{BUCKET}/unseen"
        for part in sorted((case / "kv_events").glob("*.parquet")):
            node = part.name.rsplit("-part-", 1)[0]
            store.put_file(str(part), f"{ledger}/node={node}/{part.name}")
        env = {**s3, **cluster_env()}
        with local_cluster(env) as address:
            _investigate(env, case, "--out", there, "--ledger-external", ledger, "--ray", address)
    return {"case": case, "here": here, "there": there}


def _files(out: Path) -> dict[str, str]:
    return {
        p.relative_to(out).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(out.rglob("*"))
        if p.is_file()
    }


def test_the_cluster_writes_the_files_of_the_local_run(runs) -> None:
    here, there = _files(runs["here"]), _files(runs["there"])
    assert set(here) == set(there), SEED
    differ = {name for name in here if here[name] != there[name]}
    explain = {n for n in differ if n.startswith("explain/")}
    for name in explain:
        local = (runs["here"] / name).read_text(encoding="utf-8")
        remote = (runs["there"] / name).read_text(encoding="utf-8")
        assert REMOTE_NOTE.search(remote) and not REMOTE_NOTE.search(local), (SEED, name)
        assert REMOTE_NOTE.sub("", remote) == local, (SEED, name)
    assert differ - explain <= HOW_RUN, (SEED, differ)
    compared = set(here) - differ
    assert set(LISTS) <= compared, (SEED, sorted(here))
    assert any(n.startswith("notifications/notices/") for n in compared), (SEED, sorted(here))


def test_the_cluster_gives_the_tables_of_the_local_run(runs) -> None:
    con = duckdb.connect()
    try:
        for name in ("here", "there"):
            con.execute(f"ATTACH '{runs[name] / 'case.duckdb'}' AS {name} (READ_ONLY)")
        for table in TABLES:
            for a, b in (("here", "there"), ("there", "here")):
                extra = con.execute(f"FROM {a}.{table} EXCEPT ALL FROM {b}.{table}").fetchall()
                assert extra == [], (SEED, table, a, extra[:3])
        ledger = con.execute("SELECT count(*) FROM there.ledger_files").fetchall()
        assert ledger == [(12,)], (SEED, ledger)  # the second run's ledger stayed in the bucket
    finally:
        con.close()


@pytest.mark.parametrize("name", ["here", "there"])
def test_both_runs_equal_the_ground_truth(runs, name) -> None:
    case = runs["case"]
    con = duckdb.connect(str(runs[name] / "case.duckdb"), read_only=True)
    try:
        exposures = _truth(case, "exposures.csv", EXPOSURE)
        assert exposures, SEED  # the case has exposures to find
        assert _got(con, f"SELECT {', '.join(EXPOSURE)} FROM exposures") == exposures, SEED
        violations = _truth(case, "violations.csv", VIOLATION)
        assert _got(con, f"SELECT {', '.join(VIOLATION)} FROM violations") == violations, SEED
        accounts = _truth(case, "accounts.csv", ACCOUNT)
        got = _got(
            con, f"SELECT {', '.join(ACCOUNT)} FROM affected_accounts WHERE confidence = 'ledger'"
        )
        assert got == accounts, SEED
    finally:
        con.close()
