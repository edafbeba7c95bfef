"""A disk that runs out of room under the case database or OUT is said as such, with what to
do, never as an internal error with a traceback (DuckDB reports it as a fatal error whose
first line may only say the database was invalidated); nothing half-written is left. On a real
small disk where one can be mounted."""

from __future__ import annotations

import errno

import duckdb
import pytest
from support.paths import SAMPLE
from support.smalldisk import small_disk

from forensics.cli import run
from forensics.errors import disk_full

FULL = 'Could not write file "/x/case.duckdb": No space left on device'


def _raised_while_handling(first: BaseException, second: BaseException) -> BaseException:
    try:
        try:
            raise first
        except BaseException:
            raise second  # noqa: B904  (as DuckDB's rollback fails after its commit did)
    except BaseException as exc:
        return exc


@pytest.mark.parametrize(
    ("exc", "said"),
    [
        (OSError(errno.ENOSPC, "No space left on device"), "[Errno 28] No space left on device"),
        (OSError(errno.EDQUOT, "Disk quota exceeded"), "[Errno 122] Disk quota exceeded"),
        (duckdb.IOException(f"IO Error: {FULL}"), f"IO Error: {FULL}"),
        (
            _raised_while_handling(
                duckdb.FatalException(f"FATAL Error: Failed to create checkpoint: {FULL}"),
                duckdb.FatalException(
                    "FATAL Error: Failed: database has been invalidated because of a previous "
                    f'fatal error.\nOriginal error: "Failed to create checkpoint: {FULL}"'
                ),
            ),
            f"FATAL Error: Failed to create checkpoint: {FULL}",
        ),
    ],
    ids=["enospc", "edquot", "duckdb", "invalidated"],
)
def test_a_full_disk_is_found_in_the_error_and_its_causes(exc, said) -> None:
    assert disk_full(exc) == said


@pytest.mark.parametrize(
    "exc",
    [
        OSError(errno.ENOENT, "No such file or directory"),
        duckdb.IOException('IO Error: Could not read file "/x": Permission denied'),
        RuntimeError("No space left on device"),  # said by something that is not a disk
    ],
)
def test_other_errors_are_not_taken_for_a_full_disk(exc) -> None:
    assert disk_full(exc) is None


def _refused(capsys) -> str:
    out = capsys.readouterr()
    text = out.out + out.err
    assert "error: a disk ran out of room: " in text and "No space left on device" in text, text
    assert "Traceback" not in text and "internal error" not in text, text
    assert "nothing is left half-written" in text and "OUT (--out) a disk with room" in text, text
    return text


def test_ingest_on_a_full_disk_says_so_and_leaves_no_case(tmp_path, capsys) -> None:
    with small_disk(tmp_path / "disk", 3 << 20) as disk:
        assert run(["ingest", str(SAMPLE), "--db", str(disk / "case.duckdb")]) == 2
        _refused(capsys)
        assert list(disk.iterdir()) == []


def test_investigate_on_a_full_disk_says_so_and_writes_no_out(tmp_path, capsys) -> None:
    with small_disk(tmp_path / "disk", 3 << 20) as disk:
        assert run(["investigate", str(SAMPLE), "--out", str(disk / "out")]) == 2
        _refused(capsys)
        assert list(disk.iterdir()) == []  # neither OUT nor its staging folder


SPILL_FULL = 'IO Error: Could not write file "/case.duckdb.kvforensics-spill-1-a/t.tmp": ' + (
    "No space left on device"
)


def _spill_fills(*_args, **_kwargs):  # type: ignore[no-untyped-def]
    raise duckdb.IOException(SPILL_FULL)


def test_a_partition_task_whose_disk_fills_is_not_a_ledger_that_cannot_be_read(
    tmp_path, capsys, monkeypatch
) -> None:
    """A ledger kept outside the case: the task's DuckDB spills beside the case database; the
    disk filling there is said as a full disk, not as a partition that cannot be read (with a
    fix about the ledger)."""
    from support.samples import hive_sample

    case = hive_sample(tmp_path)
    db = tmp_path / "case.duckdb"
    assert run(["ingest", str(case), "--db", str(db), "--ledger-external"]) == 0
    capsys.readouterr()
    monkeypatch.setattr("forensics.analysis.partitions._sweep_partition", _spill_fills)
    assert run(["analyze", "--db", str(db)]) == 2
    text = _refused(capsys)
    assert SPILL_FULL in text and "cannot be read" not in text, text


def test_a_check_whose_disk_fills_is_not_a_part_that_cannot_be_read(tmp_path, monkeypatch) -> None:
    """Ingest's check of a batch of parts: the same, for its DuckDB's spill."""
    from forensics.ledger import check
    from forensics.ledger.external import LedgerFile

    monkeypatch.setattr(check, "_read_batch", _spill_fills)
    part = LedgerFile(str(tmp_path / "p.parquet"), "kv_events/node=a/p.parquet", "a", 0)
    with pytest.raises(duckdb.IOException, match="No space left on device"):
        check._check_batch(duckdb.connect(), [part], {}, assume_utc=False)


@pytest.mark.parametrize("full", [True, False], ids=["disk-full", "other"])
def test_a_ray_task_whose_disk_fills_raises_the_error_itself(full) -> None:
    """On a cluster, Ray hands a task's error back wrapped with the worker's traceback; a full
    disk is raised as the error itself, as the local run raises it (other errors stay
    wrapped, with their traceback)."""
    ray = pytest.importorskip("ray")
    from types import SimpleNamespace

    from forensics.base.raytasks import result_of

    cause = duckdb.IOException(SPILL_FULL if full else "IO Error: something else")
    wrapped = ray.exceptions.RayTaskError("sweep_partition", "Traceback (worker)", cause)

    def get(_ref):  # type: ignore[no-untyped-def]
        raise wrapped.as_instanceof_cause()

    fake = SimpleNamespace(get=get, exceptions=ray.exceptions)
    with pytest.raises(duckdb.IOException) as raised:
        result_of(fake, object())
    assert (raised.value is cause) is full
