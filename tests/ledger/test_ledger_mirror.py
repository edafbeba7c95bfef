"""The local copies of a ledger's remote parts (forensics.ledger.mirror) need the parts' size on
the disk they are made on. A disk without that room is said before any part is fetched, with
the sizes ingest recorded (the analysis) or the store's listing of the parts' folders (ingest's
checks); a disk that fills while the copies are written is said as such, never as a part that
cannot be read; either way no copy is left."""

from __future__ import annotations

import errno
import hashlib
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import fsspec
import pytest

from forensics.casedb import interrupts
from forensics.casedb.spillnames import SPILL_PREFIX
from forensics.errors import InputError, Interrupted
from forensics.ledger import mirror
from forensics.ledger.external import LedgerFile

ROOT = "/kvf-room"
PARTS = {
    "node=a/p1.parquet": b"x" * 10,
    "node=a/p2.parquet": b"y" * 20,
    "node=b/p.parquet": b"z" * 5,
}
NEED = 35  # the parts' bytes together


@pytest.fixture(autouse=True)
def nothing_held_after():
    """Each test's copies give their room back when they are removed (one held for ever would
    make every later copy on the disk wait for it)."""
    yield
    held = dict(mirror._HELD)
    mirror._HELD.clear()
    assert held == {}, f"copies removed but their room still held: {held}"


@pytest.fixture
def remote() -> list[LedgerFile]:
    fs = fsspec.filesystem("memory")
    for name, data in PARTS.items():
        fs.pipe(f"{ROOT}/{name}", data)
    fs.pipe(f"{ROOT}/node=a/not-a-part.txt", b"w" * 1000)  # listed beside them, not counted
    files = [
        LedgerFile(f"memory://{ROOT}/{name}", f"memory://{ROOT}/{name}", name[5], rank)
        for rank, name in enumerate(PARTS)
    ]
    yield files
    fs.rm(ROOT, recursive=True)


def _fetched(monkeypatch) -> list[str]:
    """The URLs the mirror fetches, in order (each still fetched as before)."""
    calls: list[str] = []
    fetch = mirror.sha256_of

    def counted(url: str, copy: Path | None = None) -> tuple[str, int]:
        calls.append(url)
        return fetch(url, copy)

    monkeypatch.setattr(mirror, "sha256_of", counted)
    return calls


def _disk(monkeypatch, folder: Path, free: int) -> None:
    """The disk of `folder` has `free` bytes; the copies must be made on no other."""

    def free_bytes(asked: Path) -> int:
        assert asked == folder, asked
        return free

    monkeypatch.setattr(mirror, "free_bytes", free_bytes)


RECORDED = pytest.mark.parametrize("recorded", [True, False], ids=["recorded", "listed"])


@RECORDED
def test_copies_that_do_not_fit_are_refused_before_any_fetch(
    remote, tmp_path, monkeypatch, recorded
) -> None:
    sizes = {f.rel: len(PARTS[f.rel.split(ROOT + "/")[1]]) for f in remote} if recorded else None
    fetched = _fetched(monkeypatch)
    _disk(monkeypatch, tmp_path, NEED - 1)
    with (
        pytest.raises(InputError) as refused,
        mirror.mirrored_files(remote, tmp_path / "case.duckdb", sizes),
    ):
        pytest.fail("the copies were made")
    text = str(refused.value)
    assert text.startswith(f"{tmp_path}: no room for the local copies of the 3 remote part(s)")
    assert "node=a, node=b" in text and "they need 35 bytes and it has 34 bytes free" in text
    assert "TMPDIR" in text and fetched == [] and list(tmp_path.iterdir()) == []


@RECORDED
def test_copies_that_just_fit_are_made(remote, tmp_path, monkeypatch, recorded) -> None:
    sizes = {f.rel: len(PARTS[f.rel.split(ROOT + "/")[1]]) for f in remote} if recorded else None
    fetched = _fetched(monkeypatch)
    _disk(monkeypatch, tmp_path, NEED)
    with mirror.mirrored_files(remote, tmp_path / "case.duckdb", sizes) as (files, found):
        assert [Path(f.url).read_bytes() for f in files] == list(PARTS.values())
        assert found == {
            f.rel: (hashlib.sha256(data).hexdigest(), len(data))
            for f, data in zip(remote, PARTS.values(), strict=True)
        }
    assert fetched == [f.url for f in remote] and list(tmp_path.iterdir()) == []


def test_a_disk_that_fills_during_the_copies_is_said_so(remote, tmp_path, monkeypatch) -> None:
    """The second part's copy meets a full disk (a real one: Linux's /dev/full answers every
    write with ENOSPC): an input error about the disk, and the first copy removed too."""
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full here")
    fetch = mirror.sha256_of

    def second_full(url: str, copy: Path | None = None) -> tuple[str, int]:
        if url == remote[1].url:
            with open("/dev/full", "wb") as full:
                full.write(b"y" * 20)
                full.flush()
        return fetch(url, copy)

    monkeypatch.setattr(mirror, "sha256_of", second_full)
    with (
        pytest.raises(InputError, match="no room for the local copies") as refused,
        mirror.mirrored_files(remote, tmp_path / "case.duckdb"),
    ):
        pytest.fail("the copies were made")
    assert "it filled while they were written" in str(refused.value)
    assert isinstance(refused.value.__cause__, OSError)
    assert refused.value.__cause__.errno == errno.ENOSPC
    assert list(tmp_path.iterdir()) == []


def test_other_failures_of_a_copy_are_not_taken_for_a_full_disk(remote, tmp_path) -> None:
    """A part gone from the store is the store's error, as before."""
    fsspec.filesystem("memory").rm(f"{ROOT}/node=a/p2.parquet")
    with (
        pytest.raises(FileNotFoundError),
        mirror.mirrored_files(remote, tmp_path / "case.duckdb", {f.rel: 0 for f in remote}),
    ):
        pytest.fail("the copies were made")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("code", [errno.ECONNRESET, errno.EACCES, errno.EIO])
def test_a_failing_store_is_not_taken_for_a_full_disk(remote, tmp_path, monkeypatch, code) -> None:
    def fails(url: str, copy: Path | None = None) -> tuple[str, int]:
        raise OSError(code, f"{os.strerror(code)}: {url} into {copy}")

    monkeypatch.setattr(mirror, "sha256_of", fails)
    with pytest.raises(OSError) as raised, mirror.mirrored_files(remote, tmp_path / "db", {}):
        pytest.fail("the copies were made")
    assert raised.value.errno == code and list(tmp_path.iterdir()) == []


def test_local_parts_need_no_room(tmp_path, monkeypatch) -> None:
    part = tmp_path / "node=a" / "p.parquet"
    part.parent.mkdir()
    part.write_bytes(b"x" * 10)
    _disk(monkeypatch, tmp_path, 0)
    files = [LedgerFile(str(part), "kv_events/node=a/p.parquet", "a", 0)]
    with mirror.mirrored_files(files, tmp_path / "case.duckdb") as (read, found):
        assert read == files and found == {}


def _copy_paused_after(monkeypatch, url: str, written: int):
    """The copy of `url` writes `written` bytes, then waits until the returned `go` is set (a
    task copying while another asks for room); every copy made is noted in the returned list."""
    fetch = mirror.sha256_of
    midway, go = threading.Event(), threading.Event()
    made: list[str] = []

    def paused(at: str, copy: Path | None = None) -> tuple[str, int]:
        made.append(at)
        if at == url and copy is not None:
            copy.write_bytes(b"x" * written)
            midway.set()
            assert go.wait(10)
        return fetch(at, copy)

    monkeypatch.setattr(mirror, "sha256_of", paused)
    return midway, go, made


def _disk_of(monkeypatch, folder: Path, size: int) -> None:
    """A disk of `size` bytes under folder, of which the copies in it take their size (and the
    note of what a copies' folder needs, a few bytes, none)."""

    def free_bytes(asked: Path) -> int:
        assert asked == folder, asked
        copies = [p for p in folder.rglob("*") if p.is_file() and p.name != mirror.NEED_FILE]
        return size - sum(p.stat().st_size for p in copies)

    monkeypatch.setattr(mirror, "free_bytes", free_bytes)


@pytest.mark.parametrize("written", [0, 8])
def test_copies_made_at_once_count_what_the_others_are_still_to_take(
    remote, tmp_path, monkeypatch, written
) -> None:
    """Two tasks on one disk of 40 bytes: the first copies node=a's parts (30 bytes) and is
    stopped after writing `written` of them. The second's 5 bytes of node=b fit beside them and
    are made at once; 35 bytes fit only once the first's copies are gone (more than the disk
    has free when the first has written some): it waits for them, fetching nothing meanwhile;
    41 bytes never fit and are refused at once."""
    a, b = remote[:2], remote[2:]
    midway, go, made = _copy_paused_after(monkeypatch, a[0].url, written)
    _disk_of(monkeypatch, tmp_path, 40)
    monkeypatch.setattr(mirror, "RECHECK_S", 0.05)
    first = _in_thread(lambda: _made(mirror.mirrored_files(a, tmp_path / "one.duckdb", _sized(a))))
    try:
        assert midway.wait(10)
        with mirror.mirrored_files(b, tmp_path / "two.duckdb", {b[0].rel: 5}) as (files, _):
            assert Path(files[0].url).read_bytes() == PARTS["node=b/p.parquet"]
        with (
            pytest.raises(InputError) as refused,
            mirror.mirrored_files(b, tmp_path / "two.duckdb", {b[0].rel: 41}),
        ):
            pytest.fail("the copies were made")
        why = f"they need 41 bytes and it has {40 - written} bytes free"
        if written:
            why += f" ({written} bytes more once other tasks remove their copies)"
        assert why in str(refused.value)
        fetched = len(made)
        told: list[str] = []
        second = _in_thread(
            lambda: _made(
                mirror.mirrored_files(b, tmp_path / "two.duckdb", {b[0].rel: 35}, told.append)
            )
        )
        time.sleep(0.3)
        assert not second.done() and len(made) == fetched  # waiting, nothing fetched
        assert told == [  # once, however often it looked again
            f"waiting for room on {tmp_path} for the copies of node=b (35 bytes; the copies of "
            f"other tasks are to take {30 - written} bytes of its {40 - written} bytes free)"
        ]
    finally:
        go.set()
    assert first.result(10) == [PARTS["node=a/p1.parquet"], PARTS["node=a/p2.parquet"]]
    assert second.result(10) == [PARTS["node=b/p.parquet"]]
    assert list(tmp_path.iterdir()) == []


def test_copies_on_another_disk_are_not_counted(remote, tmp_path, monkeypatch) -> None:
    """What a task's copies hold on one disk leaves another disk's room as it is."""
    a, b = remote[:2], remote[2:]
    midway, go, _ = _copy_paused_after(monkeypatch, a[0].url, 0)
    monkeypatch.setattr(mirror, "free_bytes", lambda _folder: 30)
    real_stat = Path.stat
    other = tmp_path / "other"
    other.mkdir()

    def stat(path: Path, **kwargs):  # `other` is a disk of its own
        found = real_stat(path, **kwargs)
        if path == other:
            return os.stat_result((found.st_mode, 0, found.st_dev + 1, *found[3:]))
        return found

    monkeypatch.setattr(Path, "stat", stat)
    first = _in_thread(lambda: _made(mirror.mirrored_files(a, tmp_path / "one.duckdb", _sized(a))))
    try:
        assert midway.wait(10)
        there = _in_thread(lambda: _made(mirror.mirrored_files(b, other / "two", {b[0].rel: 30})))
        assert there.result(5) == [PARTS["node=b/p.parquet"]]  # at once
        here = _in_thread(lambda: _made(mirror.mirrored_files(b, tmp_path / "x", {b[0].rel: 11})))
        time.sleep(0.3)
        assert not here.done()  # beside the first's copies: waits for them
    finally:
        go.set()
    assert len(first.result(10)) == 2 and len(here.result(10)) == 1


def _in_thread(fn: Callable[[], Any]) -> Future[Any]:
    """fn run in a daemon thread: a task that waits for ever fails the test at its result's
    timeout, and does not hold the test process at its exit."""
    done: Future[Any] = Future()

    def run() -> None:
        try:
            done.set_result(fn())
        except BaseException as exc:
            done.set_exception(exc)

    threading.Thread(target=run, daemon=True).start()
    return done


def _sized(files: list[LedgerFile]) -> dict[str, int]:
    """The parts' sizes as ingest records them."""
    return {f.rel: len(PARTS[f.rel.split(ROOT + "/")[1]]) for f in files}


def _made(copies) -> list[bytes]:
    """The bytes of the copies `copies` (a mirrored_files block) makes."""
    with copies as (files, _found):
        return [Path(f.url).read_bytes() for f in files]


def test_a_task_waiting_for_room_stops_at_ctrl_c(remote, tmp_path, monkeypatch) -> None:
    """A task waiting for the others' copies to be removed stops when Ctrl-C comes (it looks
    at least every RECHECK_S), fetching nothing; the others go on and end as usual."""
    a, b = remote[:2], remote[2:]
    midway, go, made = _copy_paused_after(monkeypatch, a[0].url, 0)
    monkeypatch.setattr(mirror, "free_bytes", lambda _folder: 30)
    monkeypatch.setattr(mirror, "RECHECK_S", 0.05)
    first = _in_thread(lambda: _made(mirror.mirrored_files(a, tmp_path / "one.duckdb", _sized(a))))
    try:
        assert midway.wait(10)
        waiting = _in_thread(lambda: _made(mirror.mirrored_files(b, tmp_path / "x", _sized(b))))
        time.sleep(0.2)
        assert not waiting.done()
        interrupts._STOP.set()  # what a Ctrl-C sets while a command runs
        with pytest.raises(Interrupted):
            waiting.result(5)
    finally:
        interrupts._STOP.clear()
        go.set()
    assert len(first.result(10)) == 2 and b[0].url not in made


def test_copies_another_process_makes_on_the_disk_are_counted(
    remote, tmp_path, monkeypatch
) -> None:
    """A Ray task is a process of its own. Another process (started as a command is) copies
    node=a's parts (30 bytes) beside this one's, on a disk of 40 bytes, and stops after
    writing 8 of them: here 41 bytes are refused at once, naming the 8 it gives back; 35 bytes
    wait for it, fetching nothing, and are made once its copies are removed."""
    b = remote[2:]
    midway, go = tmp_path / "midway", tmp_path / "go"
    monkeypatch.setattr(mirror, "RECHECK_S", 0.05)
    _disk_of(monkeypatch, tmp_path, 40)
    other = subprocess.Popen(
        [sys.executable, "-c", _ELSEWHERE, str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert _appears(midway, other), other.communicate()[0]
        with (
            pytest.raises(InputError) as refused,
            mirror.mirrored_files(b, tmp_path / "two.duckdb", {b[0].rel: 41}),
        ):
            pytest.fail("the copies were made")
        assert "they need 41 bytes and it has 32 bytes free (8 bytes more once other tasks " in (
            str(refused.value)
        )
        fetched = _fetched(monkeypatch)
        waiting = _in_thread(
            lambda: _made(mirror.mirrored_files(b, tmp_path / "two.duckdb", {b[0].rel: 35}))
        )
        time.sleep(0.5)
        assert not waiting.done() and fetched == []
    finally:
        go.touch()
        output = other.communicate(timeout=60)[0]
    assert other.returncode == 0, output
    assert waiting.result(10) == [PARTS["node=b/p.parquet"]]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["go", "midway"]


def _appears(path: Path, process: subprocess.Popen[str], seconds: float = 60) -> bool:
    """Whether path appears before the process ends or the time runs out."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and process.poll() is None:
        if path.exists():
            return True
        time.sleep(0.01)
    return path.exists()


# The other process: node=a's parts, in its own memory store, copied beside FOLDER/one.duckdb
# on the disk _disk_of models (40 bytes), stopping after writing 8 bytes until FOLDER/go appears.
_ELSEWHERE = f"""
import sys, time
from pathlib import Path
import fsspec
from forensics.ledger import mirror
from forensics.ledger.external import LedgerFile
folder = Path(sys.argv[1])
parts = {{"node=a/p1.parquet": b"x" * 10, "node=a/p2.parquet": b"y" * 20}}
store = fsspec.filesystem("memory")
files = []
for rank, (name, data) in enumerate(parts.items()):
    store.pipe("{ROOT}/" + name, data)
    url = "memory://{ROOT}/" + name
    files.append(LedgerFile(url, url, "a", rank))
fetch = mirror.sha256_of
def paused(url, copy=None):
    if url == files[0].url and copy is not None:
        copy.write_bytes(b"x" * 8)
        (folder / "midway").touch()
        deadline = time.monotonic() + 60
        while not (folder / "go").exists() and time.monotonic() < deadline:
            time.sleep(0.01)
    return fetch(url, copy)
mirror.sha256_of = paused
mirror.free_bytes = lambda asked: 40 - sum(
    p.stat().st_size for p in folder.rglob("*") if p.is_file() and p.name != mirror.NEED_FILE
)
sizes = {{f.rel: len(data) for f, data in zip(files, parts.values())}}
with mirror.mirrored_files(files, folder / "one.duckdb", sizes):
    pass
"""


def test_spill_folders_without_a_note_or_of_a_killed_run_are_not_counted(
    remote, tmp_path, monkeypatch
) -> None:
    """DuckDB's own spill folder (no note of what it needs) of a running process, and the
    copies' folder a killed run left (its process gone), take nothing from the room."""
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    stale = tmp_path / f"case.duckdb.{SPILL_PREFIX}{int(gone.stdout)}-0123abcd"
    stale.mkdir()
    (stale / mirror.NEED_FILE).write_text("1000")
    spill = tmp_path / f"case.duckdb.{SPILL_PREFIX}{os.getppid()}-4567cdef"
    spill.mkdir()
    monkeypatch.setattr(mirror, "free_bytes", lambda _folder: 5)
    b = remote[2:]
    made = _in_thread(lambda: _made(mirror.mirrored_files(b, tmp_path / "two.duckdb", _sized(b))))
    assert made.result(5) == [PARTS["node=b/p.parquet"]]  # at once
    assert stale.is_dir() and spill.is_dir()  # neither removed: another's to judge


def test_a_folder_that_cannot_be_locked_still_takes_the_copies(
    remote, tmp_path, monkeypatch
) -> None:
    """A file system that refuses flock on a folder (NFS may, on a folder opened to read): the
    copies are made, checked and removed all the same."""
    import fcntl

    def refused(*_args: object) -> None:
        raise OSError(errno.EBADF, "Bad file descriptor")

    monkeypatch.setattr(fcntl, "flock", refused)
    _disk_of(monkeypatch, tmp_path, 100)
    a = remote[:2]
    with mirror.mirrored_files(a, tmp_path / "case.duckdb", _sized(a)) as (files, found):
        assert [Path(f.url).read_bytes() for f in files] == [
            PARTS["node=a/p1.parquet"],
            PARTS["node=a/p2.parquet"],
        ]
        assert len(found) == 2
    _disk_of(monkeypatch, tmp_path, 29)
    with (
        pytest.raises(InputError, match="they need 30 bytes and it has 29 bytes free"),
        mirror.mirrored_files(a, tmp_path / "case.duckdb", _sized(a)),
    ):
        pytest.fail("the copies were made")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("note", ["removed", "kept"])
def test_copies_that_could_not_be_removed_are_not_waited_for(
    remote, tmp_path, monkeypatch, note
) -> None:
    """Copies this process could not remove stay on the disk (their room is gone) but are no
    longer held: a later task is refused or admitted by the room left, never left waiting for
    them as long as the process runs; also when their note of what they need could not be
    removed either (this process's own copies are those it holds, not those it sees)."""
    monkeypatch.setattr(mirror.shutil, "rmtree", lambda *_a, **_k: None)  # nothing removed
    unlink = Path.unlink

    def kept(path: Path, missing_ok: bool = False) -> None:
        if path.name == mirror.NEED_FILE:
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        unlink(path, missing_ok=missing_ok)

    if note == "kept":
        monkeypatch.setattr(Path, "unlink", kept)
    _disk_of(monkeypatch, tmp_path, 40)
    a, b = remote[:2], remote[2:]
    with mirror.mirrored_files(a, tmp_path / "one.duckdb", _sized(a)):
        pass
    left = [p for p in tmp_path.iterdir() if p.is_dir()]
    assert len(left) == 1 and (left[0] / mirror.NEED_FILE).exists() == (note == "kept")
    made = _in_thread(lambda: _made(mirror.mirrored_files(b, tmp_path / "two", {b[0].rel: 11})))
    with pytest.raises(InputError, match="they need 11 bytes and it has 10 bytes free\n"):
        made.result(5)  # 30 of the 40 taken by what is left, nothing held: refused at once


def test_notes_of_another_user_or_behind_a_link_are_not_counted(
    remote, tmp_path, monkeypatch
) -> None:
    """In a temporary folder other users share, a copies' folder planted under the name of a
    process that always runs (pid 1) with a huge need would hold every task here for ever: a
    folder of another user, or a link to a folder, is not counted; the same folder of this
    user is (tasks of one user coordinate)."""
    target = tmp_path / "elsewhere"
    target.mkdir()
    (target / mirror.NEED_FILE).write_text(str(10**15))
    (tmp_path / f"{SPILL_PREFIX}1-00000001").symlink_to(target)
    planted = tmp_path / f"{SPILL_PREFIX}1-00000002"
    planted.mkdir()
    (planted / mirror.NEED_FILE).write_text(str(10**15))
    monkeypatch.setattr(mirror, "free_bytes", lambda _folder: 100)
    monkeypatch.setattr(mirror, "RECHECK_S", 0.05)
    b = remote[2:]
    waits = _in_thread(lambda: _made(mirror.mirrored_files(b, tmp_path / "x", _sized(b))))
    time.sleep(0.3)
    assert not waits.done()  # this user's note (of a live pid) is counted
    try:
        os.chown(planted, 54321, 54321)
    except PermissionError:
        pytest.skip("cannot give a folder to another user here")
    assert waits.result(5) == [PARTS["node=b/p.parquet"]]
    made = _in_thread(lambda: _made(mirror.mirrored_files(b, tmp_path / "y", _sized(b))))
    assert made.result(5) == [PARTS["node=b/p.parquet"]]  # at once
