"""A ledger kept in an object store (`s3://`), read through s3fs from a real S3 server on
127.0.0.1 (moto's, a process of its own speaking S3's HTTP API), checked and swept locally and
by the tasks of a real Ray cluster whose workers read it over the network: the same tables as
the loaded ledger (EXCEPT ALL both ways). And when the storage stops answering, or a part
changes there, each command says so as an input error naming the partition and the fix
(before, an unreachable endpoint ended ingest and analyze as an internal error with
botocore's traceback, and a task's error on the cluster printed the worker's whole
traceback), and the analysis tables stay as they were."""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

pytest.importorskip("s3fs")
pytest.importorskip("moto")
pytest.importorskip("ray")

from support.cases import query
from support.raycluster import cluster_env, free_port, local_cluster  # noqa: E402
from support.s3 import BUCKET, LEDGER, s3_env, s3_server, s3_store  # noqa: E402
from support.samples import OWN_LEDGER, differences
from support.smalldisk import small_disk  # noqa: E402

from forensics.casedb.spillnames import SPILL_PREFIX  # noqa: E402
from forensics.errors import UsageError  # noqa: E402
from forensics.ledger.external import filesystem  # noqa: E402
from forensics.ledger.storage import (  # noqa: E402
    STORAGE_FIX,
    StorageError,
    answering,
    storage_failure,
)

FROM_STORAGE = "from the ledger's storage"


@pytest.fixture(scope="module")
def s3_log(tmp_path_factory) -> Path:
    """The S3 server's log: a line per request it served."""
    return tmp_path_factory.mktemp("s3") / "server.log"


@pytest.fixture(scope="module")
def s3(s3_log) -> Iterator[dict[str, str]]:
    with s3_server(s3_log) as env:
        yield env


def _bucket(env: dict[str, str], case: Path) -> None:
    """The case's hive ledger uploaded to LEDGER, part for part."""
    fs = s3_store(env)
    fs.mkdir(BUCKET)
    for part in sorted((case / "kv_events").rglob("*.parquet")):
        fs.put_file(str(part), f"{LEDGER}/{part.parent.name}/{part.name}")


def kvforensics(env: dict[str, str], *args: object) -> subprocess.CompletedProcess[str]:
    """The command, in a process of its own with env (as a responder runs it)."""
    return subprocess.run(
        [sys.executable, "-m", "forensics", *map(str, args)],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture(scope="module")
def cases(s3, spoiled, tmp_path_factory) -> dict[str, Path]:
    """The spoiled hive sample's ledger in the bucket, ingested and analysed from there on
    this machine and on a real Ray cluster started with the S3 settings (its workers read
    the parts themselves)."""
    case, loaded = spoiled
    _bucket(s3, case)
    root = tmp_path_factory.mktemp("s3cases")
    here, there = root / "here.duckdb", root / "there.duckdb"
    for args in (
        ("ingest", case, "--db", here, "--ledger-external", LEDGER),
        ("analyze", "--db", here),
    ):
        done = kvforensics(s3, *args)
        assert done.returncode == 1, done.stdout + done.stderr  # findings
    env = {**s3, **cluster_env()}
    with local_cluster(env) as address:
        for args in (
            ("ingest", case, "--db", there, "--ledger-external", LEDGER, "--ray", address),
            ("analyze", "--db", there, "--ray", address),
        ):
            done = kvforensics(env, *args)
            assert done.returncode == 1, done.stdout + done.stderr
    return {"case": case, "loaded": loaded, "here": here, "there": there, "root": root}


def test_a_ledger_in_s3_gives_the_tables_of_the_loaded_ledger(cases) -> None:
    for db in (cases["here"], cases["there"]):
        assert query(db, OWN_LEDGER) == [("VIEW",)]  # nothing of it is stored
        assert query(db, "SELECT count(*) FROM ledger_files") == [(5,)]
        assert query(db, "SELECT count(*) FROM exposures") == [(46,)]  # the ground truth
        assert set(differences(cases["loaded"], db)) == {"input_files", "quarantine"}
        # the parts are named by their URL, and the quarantined row is the loaded one's
        assert query(db, 'SELECT file, "row", reason FROM quarantine') == [
            (
                f"{LEDGER}/node=decode-1/decode-1-part-00001.parquet",
                5,
                "slot_count must be an integer > 0",
            )
        ]
    assert differences(cases["here"], cases["there"]) == {}


def test_each_part_is_fetched_once_by_its_task_and_its_copy_removed(
    s3, s3_log, cases, tmp_path
) -> None:
    """A task fetches each of its remote parts once into a local copy, hashed as it arrives
    (forensics.ledger.mirror), and reads the copy: one GET of each part, and at most one more
    for its footer by the view over the parts on the case's own connection. Read through the
    store, an analysis fetched each part two or three times and asked for its size some 70
    times (328 requests for the sample's four parts, now 28), and ingest's check fetched each
    part three times. No copy is left."""
    names = [f"/{BUCKET}/ledger/{p}" for (p,) in query(cases["here"], PART_NAMES)]
    for args in (
        ("analyze", "--db", cases["here"]),
        ("ingest", cases["case"], "--db", tmp_path / "again.duckdb", "--ledger-external", LEDGER),
    ):
        before = len(s3_log.read_bytes().splitlines())
        assert kvforensics(s3, *args).returncode == 1
        served = s3_log.read_bytes().splitlines()[before:]
        gets = {n: sum(f"GET {n} ".encode() in line for line in served) for n in names}
        assert len(gets) == 5 and set(gets.values()) <= {1, 2}, (args[0], gets)
        assert min(gets.values()) == 1 or args[0] == "ingest", gets
    for root in (cases["root"], tmp_path):
        left = [p.name for p in root.iterdir() if not p.name.endswith(".duckdb")]
        assert left == [], left
    con = duckdb.connect()  # the check from the copies records what it recorded before
    try:
        con.execute(f"ATTACH '{cases['here']}' AS a (READ_ONLY)")
        con.execute(f"ATTACH '{tmp_path / 'again.duckdb'}' AS b (READ_ONLY)")
        for t in ("input_files", "quarantine", "ledger_files", "ingest_warnings"):
            for x, y in (("a", "b"), ("b", "a")):
                got = con.execute(f"FROM {x}.{t} EXCEPT ALL FROM {y}.{t}").fetchall()
                assert got == [], (t, x, got)
    finally:
        con.close()


PART_NAMES = "SELECT substr(url, strlen('" + LEDGER + "/') + 1) FROM ledger_files ORDER BY url"


def _refused(done: subprocess.CompletedProcess[str], says: str) -> str:
    """The one error line and its fix, never a traceback."""
    text = done.stdout + done.stderr
    assert done.returncode == 2, text
    assert says in text, text
    assert "Traceback" not in text and "internal error" not in text and "ray::" not in text, text
    return text


def _ingest_anew(env: dict[str, str], case: Path, root: Path) -> subprocess.CompletedProcess[str]:
    return kvforensics(
        env, "ingest", case, "--db", root / "new.duckdb", "--ledger-external", LEDGER
    )


def test_an_unreachable_storage_is_an_input_error_and_changes_nothing(cases, tmp_path) -> None:
    gone = s3_env(free_port())  # nothing listens there
    exposures = query(cases["here"], "SELECT count(*) FROM exposures")
    text = _refused(
        _ingest_anew(gone, cases["case"], tmp_path),
        f"cannot read the list of its parts {FROM_STORAGE}: EndpointConnectionError",
    )
    assert STORAGE_FIX.split(":")[0] in " ".join(text.split())
    for extra in ((), ("--ray",)):  # --ray alone: Ray embedded on this machine
        text = _refused(
            kvforensics(gone, "analyze", "--db", cases["here"], *extra),
            "cannot be read: EndpointConnectionError: Could not connect to the endpoint URL",
        )
        # the partition that failed first: a decode node's, or the prefill nodes' together
        assert re.search(r"the partitions? node=", text) and gone["AWS_ENDPOINT_URL"] in text
        assert query(cases["here"], "SELECT count(*) FROM exposures") == exposures


def test_credentials_the_storage_refuses_are_an_input_error(cases, tmp_path) -> None:
    with s3_server(tmp_path / "server.log", checks_credentials=True) as strict:
        _refused(
            _ingest_anew(strict, cases["case"], tmp_path),
            f"cannot read the list of its parts {FROM_STORAGE}: The AWS Access Key Id you "
            "provided does not exist in our records",
        )
    assert not (tmp_path / "new.duckdb").exists() or query(
        tmp_path / "new.duckdb", "SELECT count(*) FROM input_files"
    ) == [(0,)]


def test_a_part_changed_in_the_bucket_is_refused_on_the_cluster_too(s3, cases) -> None:
    fs = s3_store(s3)
    part = f"{LEDGER}/node=prefill-0/prefill-0-part-00001.parquet"
    original = fs.cat_file(part)
    table = pq.read_table(pa.BufferReader(original))
    starts = table["slot_start"].to_pylist()
    starts[3] += 16  # still a good part, and another piece of evidence
    index = table.schema.get_field_index("slot_start")
    table = table.set_column(index, "slot_start", pa.array(starts, table["slot_start"].type))
    changed = pa.BufferOutputStream()
    pq.write_table(table, changed)
    fs.pipe_file(part, changed.getvalue().to_pybytes())
    try:
        for extra in ((), ("--ray",)):
            _refused(
                kvforensics(s3, "analyze", "--db", cases["there"], *extra),
                f"the part {part} changed since it was ingested",
            )
    finally:
        fs.pipe_file(part, original)
    assert kvforensics(s3, "analyze", "--db", cases["there"]).returncode == 1  # as it was


def _unreachable_read() -> duckdb.Error:
    """What DuckDB raises reading a part through s3fs from an endpoint nobody answers."""
    import s3fs

    fs = s3fs.S3FileSystem(
        key="kvf-test",
        secret="kvf-test",
        endpoint_url=f"http://127.0.0.1:{free_port()}",  # nothing listens there
        config_kwargs={"retries": {"max_attempts": 1}},
    )
    con = duckdb.connect()
    con.register_filesystem(fs)
    with pytest.raises(duckdb.Error) as raised:
        con.execute(f"SELECT * FROM read_parquet('{LEDGER}/node=a/part.parquet')")
    return raised.value


def _cut(whole: bytes) -> bytes:
    return whole[: len(whole) // 2]


def _pages_spoilt(whole: bytes) -> bytes:
    """Bytes inside the first column's compressed pages spoilt: the footer still reads."""
    spoilt = whole[:100] + b"\xff" * 64 + whole[164:]
    assert pq.ParquetFile(pa.BufferReader(spoilt)).metadata.num_rows > 0
    return spoilt


@pytest.mark.parametrize(
    ("damage", "says"),
    [
        (_cut, ["Invalid Input Error: No magic", "end of file '{url}'"]),
        (_pages_spoilt, ['Failed to read file "{url}"']),  # the read of the rows, not the footer
    ],
    ids=["cut", "pages"],
)
def test_a_damaged_part_in_the_bucket_is_named_by_its_url(
    s3, cases, tmp_path, damage, says
) -> None:
    """Ingest reads a remote part from its local copy: a read error, of its footer or of its
    rows, names the part in the store, never the copy."""
    fs = s3_store(s3)
    url = f"s3://{BUCKET}/{damage.__name__}/node=decode-1/decode-1-part-00001.parquet"
    fs.pipe_file(url, damage(fs.cat_file(f"{LEDGER}/node=decode-1/decode-1-part-00001.parquet")))
    done = kvforensics(
        s3,
        "ingest",
        cases["case"],
        "--db",
        tmp_path / "damaged.duckdb",
        "--ledger-external",
        url.rsplit("/", 2)[0],
    )
    text = _refused(done, f"{url}: cannot read this Parquet file: ")
    assert all(said.format(url=url) in text for said in says), text
    assert SPILL_PREFIX not in text, text  # the copy is not named


def test_storage_failures_are_told_from_other_errors() -> None:
    """What DuckDB raises when a registered fsspec filesystem fails (its base Error, with the
    Python traceback as its text, and maybe the statement's place after it) is the storage's
    failure, named by the error's line; DuckDB's own errors, and the filesystem's OSErrors,
    are not."""
    error = _unreachable_read()
    assert type(error) is duckdb.Error
    why = storage_failure(error)
    assert why is not None and why.startswith(
        "EndpointConnectionError: Could not connect to the endpoint URL: "
    )
    assert why.endswith(f'/{BUCKET}/ledger/node%3Da/part.parquet"'), why
    con = duckdb.connect()
    with pytest.raises(duckdb.Error) as own:
        con.execute("SELECT * FROM no_such_table")
    assert storage_failure(own.value) is None
    assert storage_failure(ValueError("Traceback (most recent call last):\nx")) is None
    with pytest.raises(StorageError, match="^KeyError: 'key'$"), answering():
        raise KeyError("key")
    with pytest.raises(FileNotFoundError), answering():  # a missing part stays what it is
        raise FileNotFoundError("part.parquet")


def test_a_url_whose_filesystem_is_not_installed_says_what_to_install() -> None:
    try:
        import gcsfs  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("gcsfs is installed here")
    with pytest.raises(UsageError, match="not installed: .*gcsfs"), answering():
        filesystem("gcs://bucket/ledger")


def test_the_copies_folder_is_a_spill_folder_that_a_later_run_removes(tmp_path) -> None:
    """The copies lie in a folder named as the case's spill folders, so that one a killed run
    left is removed by the next run (forensics.casedb.dbopen.remove_stale_spills) and is not taken
    for someone else's file in OUT; it is gone once the copies are."""
    import fsspec

    from forensics.casedb.dbopen import remove_stale_spills
    from forensics.casedb.spillnames import spill_pid
    from forensics.ledger.external import LedgerFile
    from forensics.ledger.mirror import mirrored_files

    fsspec.filesystem("memory").pipe("/kvf-mirror/node=a/part.parquet", b"PAR1 bytes")
    url = "memory://kvf-mirror/node=a/part.parquet"
    db = tmp_path / "case.duckdb"
    with mirrored_files([LedgerFile(url, url, "a", 0)], db) as (files, found):
        folder = Path(files[0].url).parents[1]
        assert folder.parent == tmp_path and spill_pid(db.name, folder.name) == os.getpid()
        assert Path(files[0].url).read_bytes() == b"PAR1 bytes"
        assert found == {url: (hashlib.sha256(b"PAR1 bytes").hexdigest(), 10)}
        stale = tmp_path / folder.name.replace(f"-{os.getpid()}-", "-999999999-")
        folder.rename(stale)  # as a run that was killed left it
        assert remove_stale_spills(db) == [stale] and not stale.exists()
        folder.mkdir()  # the context removes its own folder
    assert list(tmp_path.iterdir()) == []


def test_a_real_disk_without_room_for_the_copies_refuses_the_analysis(s3, cases, tmp_path) -> None:
    """The case database on a disk with 300,000 bytes free, less than a decode partition's
    part: `analyze` says so and stops before fetching it, leaves no copy, and the tables stay
    as they were; with the room back, it runs."""
    case_db = cases["here"].read_bytes()
    with small_disk(tmp_path / "disk", len(case_db) + (4 << 20)) as disk:
        db = disk / "case.duckdb"
        db.write_bytes(case_db)
        room = os.statvfs(disk)
        (disk / "filler").write_bytes(b"\0" * (room.f_bavail * room.f_frsize - 300_000))
        text = _refused(kvforensics(s3, "analyze", "--db", db), "no room for the local copies")
        assert f"{disk}: " in text and "bytes free" in text, text
        assert sorted(p.name for p in disk.iterdir()) == ["case.duckdb", "filler"]
        assert query(db, "SELECT count(*) FROM exposures") == query(
            cases["here"], "SELECT count(*) FROM exposures"
        )
        (disk / "filler").unlink()
        assert kvforensics(s3, "analyze", "--db", db).returncode == 1


@contextmanager
def _in_process(env: dict[str, str], monkeypatch) -> Iterator[None]:
    """This process pointed at the S3 server, with no s3fs instance made before."""
    import s3fs

    for key, value in env.items():
        monkeypatch.setenv(key, value)
    s3fs.S3FileSystem.clear_instance_cache()
    try:
        yield
    finally:
        s3fs.S3FileSystem.clear_instance_cache()


def test_no_room_for_the_copies_is_said_before_any_part_is_fetched(
    s3, cases, tmp_path, monkeypatch
) -> None:
    """The analysis compares the sizes ingest recorded, ingest's check the store's listing of
    each folder, with the room on the disk the copies go to (here, a disk with 1,000 bytes
    free): an input error, before any part is fetched, and the tables as they were."""
    from forensics.analysis.stage import analyze
    from forensics.bench.stages import ingest
    from forensics.db import connect
    from forensics.errors import InputError
    from forensics.ledger import mirror

    db = tmp_path / "case.duckdb"
    db.write_bytes(cases["here"].read_bytes())
    monkeypatch.setattr(mirror, "free_bytes", lambda folder: 1000 if folder == tmp_path else 0)
    fetched: list[str] = []
    monkeypatch.setattr(mirror, "sha256_of", lambda url, copy: fetched.append(f"{url} {copy}"))
    with _in_process(s3, monkeypatch):
        con = connect(db)
        try:
            with pytest.raises(InputError, match="no room for the local copies") as analysing:
                analyze(con)
        finally:
            con.close()
        with pytest.raises(InputError, match="no room for the local copies") as ingesting:
            ingest(str(cases["case"]), str(tmp_path / "new.duckdb"), None, ledger=LEDGER)
    for refused in (analysing, ingesting):
        text = str(refused.value)
        assert f"{tmp_path}: " in text and "it has 1,000 bytes free" in text, text
    assert fetched == []
    assert [p.name for p in tmp_path.iterdir() if SPILL_PREFIX in p.name] == []  # no copy
    assert query(db, "SELECT count(*) FROM exposures") == query(
        cases["here"], "SELECT count(*) FROM exposures"
    )


def test_ray_tasks_on_one_machine_wait_for_each_others_copies(s3, cases, tmp_path) -> None:
    """Ray tasks run in processes of their own; here their copies go to one TMPDIR, a real
    small disk that holds either of the two largest partitions' parts but not both at once.
    The analysis (an embedded Ray: two worker processes) runs, one task waiting for the
    other's copies to be removed, and gives the tables of the run on this machine; nothing is
    left on that disk. (Each task used to see the same free room and fetch: the disk filled
    half way through and the run stopped.)"""
    sizes: dict[str, int] = {}
    for part in (cases["case"] / "kv_events").rglob("*.parquet"):
        sizes[part.parent.name] = sizes.get(part.parent.name, 0) + part.stat().st_size
    second, largest = sorted(sizes.values())[-2:]
    db = tmp_path / "case.duckdb"
    db.write_bytes(cases["here"].read_bytes())
    with small_disk(tmp_path / "tmp", (largest + second // 2) // 4096 * 4096) as tmp:
        done = kvforensics(
            {**s3, "TMPDIR": str(tmp), "RAY_TMPDIR": "/tmp"}, *("analyze", "--db", db, "--ray")
        )
        assert done.returncode == 1, done.stdout + done.stderr  # findings
        assert list(tmp.iterdir()) == []
    assert differences(cases["here"], db) == {}


def test_a_task_waiting_for_room_on_this_machine_says_so(s3, cases, tmp_path) -> None:
    """The case database on a real small disk whose free room holds either of the two largest
    partitions' parts but not both: the two tasks start together, one waits for the other's
    copies to go and says so in the run's log, and the analysis gives the tables of the run
    with room to spare."""
    sizes: dict[str, int] = {}
    for part in (cases["case"] / "kv_events").rglob("*.parquet"):
        sizes[part.parent.name] = sizes.get(part.parent.name, 0) + part.stat().st_size
    second, largest = sorted(sizes.values())[-2:]
    case_db = cases["here"].read_bytes()
    with small_disk(tmp_path / "disk", len(case_db) + (4 << 20)) as disk:
        db = disk / "case.duckdb"
        db.write_bytes(case_db)
        room = os.statvfs(disk)
        free = largest + second // 2
        (disk / "filler").write_bytes(b"\0" * (room.f_bavail * room.f_frsize - free))
        done = kvforensics(s3, "analyze", "--db", db)
        assert done.returncode == 1, done.stdout + done.stderr
        assert f"analyze: waiting for room on {disk} for the copies of node=" in done.stderr, (
            done.stderr
        )
        assert differences(cases["here"], db) == {}
