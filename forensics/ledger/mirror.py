"""A partition task's local copy of its parts kept at an fsspec URL (an object store), for the
analysis and for ingest's checks.

A task reads its partition several times (its request ids and hashes, the sweep's input, the
events its pieces name) and computes each part's SHA-256 beside those reads. Over a network,
through the store's fsspec filesystem, each of those reads fetched the part again: on the
bench's 11 M-event ledger served by a real S3 server on this machine, the analysis took 9.0 to
9.5 s where the same parts on disk took 3.5 to 3.9 s. So a task first fetches each remote
part once, byte for byte, into a folder of its own, computing the part's SHA-256 and size as
the bytes arrive, and reads that copy. The digests are checked against what ingest recorded
before anything is read, and the bytes analysed are the bytes hashed: a part that changes in
the store while the task runs cannot be half read from one version and hashed from another.

The folder is named as a spill folder (forensics.casedb.dbopen.scratch_spill_folder: beside the case
database on this machine, in the system's temporary folder elsewhere), so that one a killed
run leaves is removed by the next, and it is removed when the task ends.

The copies take the parts' own size on that disk. Before fetching anything a task compares
the parts' sizes (those ingest recorded; at ingest, the store's listing of their folders) with
the disk's free room, and a disk that fills while the copies are written is reported as such:
either way an input error naming the folder, the sizes and where the copies can go instead,
never a part "that cannot be read". Tasks that run at once on one machine (the analysis'
threads, ingest's checks, Ray tasks whose TMPDIR is one folder) each count the room the
others' copies are still to take, and wait for it rather than fill the disk together (see
_HELD).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

from forensics.casedb.dbopen import process_running, scratch_spill_folder
from forensics.casedb.interrupts import stop_if_interrupted
from forensics.casedb.spillnames import spill_folder_pid
from forensics.errors import NO_ROOM_ERRNOS, InputError
from forensics.ledger.external import LedgerFile, filesystem, folder_of, is_url, sha256_of
from forensics.ledger.storage import answering, raise_storage_failure
from forensics.ledger.view import PartView

try:
    import fcntl
except ImportError:  # no flock on this system: see _locked
    fcntl = None  # type: ignore[assignment]


# Told once, in words, when a task starts to wait for the room other tasks' copies hold.
Waiting = Callable[[str], None]


@contextmanager
def mirrored(
    parts: list[PartView],
    beside: Path | None,
    sizes: Mapping[str, int] | None = None,
    waiting: Waiting | None = None,
) -> Iterator[tuple[list[PartView], dict[str, tuple[str, int]]]]:
    """The parts as the task reads them, each remote one replaced by its local copy (same
    name, rank and node), and the SHA-256 and size of each copy by part name; the copies are
    removed on leaving. Parts on this machine's disk are read where they are. sizes: the
    parts' sizes by part name, as ingest recorded them (None: listed from the store).
    waiting: told when the task waits for room other tasks' copies hold (see _HELD)."""
    with mirrored_files([p.file for p in parts], beside, sizes, waiting) as (files, found):
        yield [replace(p, file=f) for p, f in zip(parts, files, strict=True)], found


@contextmanager
def mirrored_files(
    files: list[LedgerFile],
    beside: Path | None,
    sizes: Mapping[str, int] | None = None,
    waiting: Waiting | None = None,
) -> Iterator[tuple[list[LedgerFile], dict[str, tuple[str, int]]]]:
    """mirrored for the files themselves (ingest's checks read files, not views of them)."""
    remote = [f for f in files if is_url(f.url)]
    if not remote:
        yield files, {}
        return
    folder = Path(scratch_spill_folder(beside))  # a spill folder's name: a stale one is removed
    need = sum(_sizes(remote) if sizes is None else [sizes.get(f.rel, 0) for f in remote])
    with _room(remote, folder, need, waiting), _removed(folder):  # _room makes the folder
        local: dict[str, LedgerFile] = {}
        found: dict[str, tuple[str, int]] = {}
        for i, f in enumerate(remote):
            # a folder per part, the copy under the part's own name: a reader's error names it
            path = folder / f"{i:06d}" / f.url.rsplit("/", 1)[-1]
            path.parent.mkdir()
            try:
                found[f.rel] = sha256_of(f.url, path)
            except OSError as exc:
                if exc.errno in NO_ROOM_ERRNOS:  # this disk, not the store
                    raise _no_room(
                        remote, folder, f"it filled while they were written: {exc}"
                    ) from exc
                raise
            local[f.rel] = replace(f, url=str(path))
        yield [local.get(f.rel, f) for f in files], found


@contextmanager
def _removed(folder: Path) -> Iterator[None]:
    """The copies' folder, removed on leaving, under the lock other processes look at it under
    (which would otherwise see its copies still on the disk and its note gone). The note goes
    first: copies that could not be removed take their room on the disk, but are no longer
    counted as copies a task holds (which others would wait for as long as this process
    runs)."""
    try:
        yield
    finally:
        with _locked(folder.parent):
            with contextlib.suppress(OSError):
                (folder / NEED_FILE).unlink(missing_ok=True)
            shutil.rmtree(folder, ignore_errors=True)


# The copies being made or held on a disk: each counts what the others are still to take (what
# they need less what they have written), since tasks that run at once on one machine each see
# the same free room. Copies that fit alone but not beside the others' wait until those are
# removed (at the end of their task), where they filled the disk half way through; copies that
# do not fit even once the others' are gone are refused at once, before any fetch.
#
# In this process (the analysis' threads, ingest's checks) they are kept here, by folder: the
# disk (its device number) and the bytes they need. Other processes' copies (Ray tasks on one
# machine, each a process of its own, with TMPDIR the same folder) are found beside ours: a
# copies' folder holds a NEED_FILE with the bytes it needs, written under a lock on the folder
# that holds them (flock), with the look at the room that admitted it.
_HELD: dict[Path, tuple[int, int]] = {}
_HELD_CHANGED = threading.Condition()
RECHECK_S = 1.0  # a waiting task looks at the disk again at least this often (others use it)
NEED_FILE = "kvforensics-copies-need"


@contextmanager
def _room(
    remote: list[LedgerFile], folder: Path, need: int, waiting: Waiting | None = None
) -> Iterator[None]:
    """Make the copies' folder and hold `need` bytes of its disk for it while the block runs:
    at once, after the other copies on the disk are removed (`waiting` is told once), or never
    (an input error) when they could not fit even then."""
    disk = folder.parent.stat().st_dev
    told = waiting is None
    with _HELD_CHANGED:
        while True:
            with _locked(folder.parent):
                free = free_bytes(folder.parent)
                needs = {f: n for f, (on, n) in _HELD.items() if on == disk}
                needs |= _other_processes(folder.parent)
                written = {f: _written(f) for f in needs}
                coming = sum(max(0, n - written[f]) for f, n in needs.items())
                if need <= free - coming:
                    folder.mkdir(parents=True)
                    (folder / NEED_FILE).write_text(str(need), encoding="ascii")
                    _HELD[folder] = (disk, need)
                    break
            held = sum(written.values())  # the room the others' copies give back when removed
            if need > free + held:
                why = f"they need {_gb(need)} and it has {_gb(free)} free"
                if held:
                    why += f" ({_gb(held)} more once other tasks remove their copies)"
                raise _no_room(remote, folder, why)
            if not told and waiting is not None:
                waiting(
                    f"waiting for room on {folder.parent} for the copies of {_nodes(remote)} "
                    f"({_gb(need)}; the copies of other tasks are to take {_gb(coming)} of its "
                    f"{_gb(free)} free)"
                )
                told = True
            stop_if_interrupted(workers_only=True)  # Ctrl-C came: a task stops waiting
            _HELD_CHANGED.wait(RECHECK_S)
    try:
        yield
    finally:
        with _HELD_CHANGED:
            _HELD.pop(folder, None)
            _HELD_CHANGED.notify_all()


@contextmanager
def _locked(folder: Path) -> Iterator[None]:
    """folder locked against other processes that look at its copies (flock on the folder
    itself: no lock file is left behind). Where it cannot be locked (a system without flock,
    or a file system that refuses it on a folder opened to read, as NFS may), the block runs
    unlocked: the copies of other processes are then counted as they are seen."""
    fd = -1
    with contextlib.suppress(OSError):  # a system that cannot open a folder so has no flock
        fd = os.open(folder, os.O_RDONLY)
    try:
        if fd >= 0 and fcntl is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        if fd >= 0:
            os.close(fd)  # which lets go of the lock


def _other_processes(parent: Path) -> dict[Path, int]:
    """The copies' folders in parent of other running processes (this one's are in _HELD),
    with the bytes they need. A spill folder without a NEED_FILE (DuckDB's own, or copies that
    could not be removed), of a process no longer running on this machine (a task killed when
    its run stopped), or not this user's folder (_ours_to_count), is not counted. (None is
    removed here: a folder shared by machines, or by containers that do not see each other's
    processes, may hold the live copies of a process this one cannot see.)"""
    found: dict[Path, int] = {}
    try:
        entries = list(os.scandir(parent))
    except OSError:
        return found
    for entry in entries:
        pid = spill_folder_pid(entry.name)
        if pid is None or pid == os.getpid() or not _ours_to_count(entry):
            continue
        path = Path(entry.path)
        try:
            need = int((path / NEED_FILE).read_text(encoding="ascii"))
        except (OSError, ValueError):
            continue
        if need > 0 and process_running(pid):
            found[path] = need
    return found


def _ours_to_count(entry: os.DirEntry[str]) -> bool:
    """Whether a spill folder's note may hold this process back: a folder (not a link to one)
    of this user. In a temporary folder other users share, a folder of another user's, or one
    planted under the name of a process that always runs, would otherwise make every task here
    wait for room it never gives back."""
    try:
        return (
            entry.is_dir(follow_symlinks=False)
            and entry.stat(follow_symlinks=False).st_uid == os.getuid()
        )
    except OSError:
        return False


def _written(folder: Path) -> int:
    """The bytes of the copies in folder so far (one folder a part: see mirrored_files)."""
    try:
        return sum(
            entry.stat().st_size
            for part in os.scandir(folder)
            if part.is_dir()
            for entry in os.scandir(part.path)
        )
    except OSError:  # not made yet, or removed meanwhile
        return 0


def free_bytes(folder: Path) -> int:
    """The room left on the disk that holds folder."""
    return shutil.disk_usage(folder).free


def _sizes(remote: list[LedgerFile]) -> list[int]:
    """The parts' sizes from the store's listing of their folders (one listing a folder)."""
    listed: dict[str, int] = {}
    for folder in sorted({folder_of(f.url) for f in remote}):
        try:
            with answering():
                fs = filesystem(folder)
                for entry in fs.ls(folder, detail=True):
                    listed[fs.unstrip_protocol(entry["name"])] = int(entry.get("size") or 0)
        except OSError as exc:
            raise_storage_failure(exc, folder, "the sizes of its parts", os_errors=True)
            raise
    return [listed.get(f.url, 0) for f in remote]


def _nodes(remote: list[LedgerFile]) -> str:
    return ", ".join(f"node={n}" for n in sorted({f.node for f in remote}))


def _no_room(remote: list[LedgerFile], folder: Path, why: str) -> InputError:
    return InputError(
        f"no room for the local copies of the {len(remote)} remote part(s) of "
        + _nodes(remote)
        + f" (each part is read from a copy on this disk): {why}",
        path=str(folder.parent),
        fix="free room on that disk, or put the copies where there is room: they are made "
        "beside the case database (--db) on this machine, and in the system's temporary "
        "folder (TMPDIR) in a Ray task",
    )


def _gb(n: int) -> str:
    if n >= 2**30:
        return f"{n / 2**30:.2f} GiB"
    return f"{n / 2**20:.1f} MiB" if n >= 2**20 else f"{n:,} bytes"
