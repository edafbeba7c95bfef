"""The analysis on a real Ray cluster (a head and a worker node started here, on 127.0.0.1)
gives the same tables as the local engine, for a ledger loaded into the case database and for a
ledger kept outside it (checked partition by partition, read by each task from its own
partition). Tables are compared row for row with EXCEPT ALL both ways, and the simulated cases
are also checked against the simulator's ground truth."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest

from forensics.cli import run
from forensics.simulate.run import SimOptions, simulate

pytest.importorskip("ray")

from support.cases import query
from support.paths import SAMPLE
from support.raycluster import cluster_env, local_cluster  # noqa: E402
from support.samples import OWN_LEDGER

ANALYSIS_TABLES = (
    "exposures",
    "violations",
    "read_stats",
    "exposure_tokens",
    "screening",
    "possible_exposures",
    "affected_requests",
    "affected_accounts",
)
INGEST_TABLES = ("input_files", "quarantine", "ingest_warnings")
NODES = (("prefill_nodes", 4), ("decode_nodes", 5))  # 9 engine nodes
BUGS = frozenset({"oversize-stub", "late-transfer", "double-alloc", "prefix-collision"})
RATES = (("late_transfer_rate", 0.3), ("double_alloc_rate", 0.3), ("prefix_collision_rate", 0.3))


@pytest.fixture(scope="module")
def cluster():
    """(address, environment): drivers run as separate processes with the cluster's token."""
    env = cluster_env()
    with local_cluster(env) as address:
        yield address, {**os.environ, **env}


@pytest.fixture(scope="module")
def nine_nodes(tmp_path_factory) -> Path:
    """A simulated case of 9 engine nodes with every bug, its ledger in node=NAME folders."""
    folder = tmp_path_factory.mktemp("sim9") / "case"
    simulate(
        folder,
        SimOptions(
            requests=240, seed=5, scale=0.001, bugs=BUGS, contents=False, overrides=(*NODES, *RATES)
        ),
    )
    return hive(folder)


def hive(folder: Path) -> Path:
    """Move each kv_events part into kv_events/node=NAME/ (NAME: the node its rows name)."""
    for part in sorted((folder / "kv_events").glob("*.parquet")):
        nodes = set(pq.read_table(part, columns=["node"])["node"].to_pylist())
        assert len(nodes) == 1, part
        target = folder / "kv_events" / f"node={nodes.pop()}"
        target.mkdir(exist_ok=True)
        part.rename(target / part.name)
    return folder


def cli(*args: object) -> int:
    return run([str(a) for a in args])


DRIVER = """
import json, sys
import ray
from forensics.cli import run
ray.init(address=sys.argv[1], log_to_driver=False, configure_logging=False)
print(json.dumps([run(args + ["--ray", sys.argv[1]]) for args in json.loads(sys.argv[2])]))
"""


def on_cluster(cluster: tuple[str, dict[str, str]], *commands: list[object]) -> list[int]:
    """Exit codes of `kvforensics COMMAND --ray ADDRESS` for each command, in one driver
    process of their own (Ray reads its token when it starts; one driver keeps its workers)."""
    address, env = cluster
    listed = json.dumps([[str(a) for a in c] for c in commands])
    done = subprocess.run(
        [sys.executable, "-c", DRIVER, address, listed],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return list(json.loads(done.stdout.strip().splitlines()[-1]))


def differences(a: Path, b: Path, tables: tuple[str, ...]) -> dict[str, tuple[int, int]]:
    """Rows of each table in a but not in b, and in b but not in a (EXCEPT ALL)."""
    con = duckdb.connect()
    con.execute(f"ATTACH '{a}' AS a (READ_ONLY)")
    con.execute(f"ATTACH '{b}' AS b (READ_ONLY)")
    out = {}
    for t in tables:
        ab = con.execute(f"SELECT count(*) FROM (FROM a.{t} EXCEPT ALL FROM b.{t})").fetchone()
        ba = con.execute(f"SELECT count(*) FROM (FROM b.{t} EXCEPT ALL FROM a.{t})").fetchone()
        out[t] = (ab[0] if ab else -1, ba[0] if ba else -1)
    con.close()
    return out


def rows(db: Path, table: str) -> int:
    con = duckdb.connect(str(db), read_only=True)
    try:
        got = con.execute(f"SELECT count(*) FROM {table}").fetchone()
    finally:
        con.close()
    return got[0] if got else 0


def local_case(case: Path, db: Path) -> Path:
    assert cli("ingest", case, "--db", db, "--ledger-load") in (0, 1)
    assert cli("analyze", "--db", db) == 1
    return db


@pytest.fixture(scope="module")
def runs(cluster, nine_nodes, tmp_path_factory) -> dict[str, Path]:
    """Every case analysed here on the local engine and on the cluster (one driver)."""
    root = tmp_path_factory.mktemp("runs")
    external = root / "external"
    shutil.copytree(nine_nodes, external)
    spoil(next((external / "kv_events" / "node=decode-2").glob("*.parquet")))
    dbs = {
        name: root / f"{name}.duckdb"
        for name in ("sample", "sample_ray", "spoiled", "external_ray")
    }
    cli("ingest", SAMPLE, "--db", dbs["sample_ray"])
    shutil.copy(dbs["sample_ray"], dbs["sample"])
    assert cli("analyze", "--db", dbs["sample"]) == 1
    local_case(external, dbs["spoiled"])
    cli("investigate", nine_nodes, "--out", root / "investigate")
    codes = on_cluster(
        cluster,
        ["analyze", "--db", dbs["sample_ray"]],
        ["ingest", external, "--db", dbs["external_ray"], "--ledger-external"],
        ["analyze", "--db", dbs["external_ray"]],
        ["investigate", nine_nodes, "--out", root / "investigate_ray"],
    )
    assert codes == [1, 1, 1, 1]  # findings (and, for the ingest, one quarantined row)
    return {
        **dbs,
        "case": nine_nodes,
        "out": root / "investigate",
        "out_ray": root / "investigate_ray",
        "nine": root / "investigate" / "case.duckdb",
        "nine_ray": root / "investigate_ray" / "case.duckdb",
    }


def test_sample_on_the_cluster_equals_the_local_run(runs) -> None:
    assert rows(runs["sample_ray"], "exposures") == 46  # the sample's ground truth
    diff = differences(runs["sample"], runs["sample_ray"], ANALYSIS_TABLES)
    assert all(d == (0, 0) for d in diff.values()), diff


def test_nine_nodes_on_the_cluster_equal_the_local_run(runs) -> None:
    truth = duckdb.read_csv(str(runs["case"] / "ground_truth" / "exposures.csv")).shape[0]
    assert rows(runs["nine_ray"], "exposures") == truth > 0
    assert rows(runs["nine_ray"], "violations") > 0
    diff = differences(runs["nine"], runs["nine_ray"], ANALYSIS_TABLES)
    assert all(d == (0, 0) for d in diff.values()), diff


def test_external_ledger_checked_and_swept_on_the_cluster(runs) -> None:
    external = runs["external_ray"]
    assert query(external, OWN_LEDGER) == [("VIEW",)]  # only the small tables are stored
    assert rows(external, "quarantine") == 1
    diff = differences(runs["spoiled"], external, ANALYSIS_TABLES + INGEST_TABLES)
    assert all(d == (0, 0) for d in diff.values()), diff


def spoil(part: Path) -> None:
    """Give the part's third row a slot_count of 0 (to be quarantined either way)."""
    table = pq.read_table(part)
    counts = table["slot_count"].to_pylist()
    counts[2] = 0
    index = table.schema.get_field_index("slot_count")
    import pyarrow as pa

    table = table.set_column(index, "slot_count", pa.array(counts, table["slot_count"].type))
    pq.write_table(table, part)


def test_investigate_on_the_cluster_writes_the_same_lists(runs) -> None:
    """Notification lists, exposures and timeline: byte-identical to the local run."""
    names = sorted(
        p.relative_to(runs["out"]).as_posix()
        for p in runs["out"].rglob("*")
        if p.suffix in (".csv", ".parquet") and "notices" not in p.parts
    )
    assert "notifications/receiving_accounts.csv" in names and "exposures.parquet" in names
    for name in names:
        assert (runs["out"] / name).read_bytes() == (runs["out_ray"] / name).read_bytes(), name
