"""OUT is never a mix of two runs: a run writes into a staging folder beside OUT and swaps it in
when complete, and one run at a time holds OUT.

The staging folder is `.<OUT name>.kvf-staging-<pid>` in OUT's parent. It starts with a copy of
the previous case database (so an unchanged case is not ingested again) and nothing else, so
files of an earlier run that this run does not write (notices of accounts no longer affected)
do not survive. The swap exchanges the two folders in one step (Linux renameat2
RENAME_EXCHANGE); where that is not available OUT is renamed aside first, and a later run puts
it back if a kill came between the two renames. A killed run leaves OUT as it was.

A run holds `.<OUT name>.kvf-lock` in OUT's parent (an flock, released by the system however the
run ends) from before it looks at OUT until its swap is done; a second run into the same OUT
stops at once with a clear message instead of racing the first for the swap."""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from forensics.base.textsafe import json_value
from forensics.casedb.spillnames import spill_pid
from forensics.errors import UsageError

# Every name investigate writes at the top of OUT; anything else there is not ours.
KNOWN_NAMES = frozenset(
    {
        "case.duckdb",
        "case.duckdb.wal",
        "quarantine.csv",
        "exposures.parquet",
        "notifications",
        "explain",
        "timeline.csv",
        "timeline.jsonl",
        "report.html",
        "manifest.json",
        "manifest.json.sha256",
        "manifest.json.sig",
    }
)
# The largest manifest read (verify, and investigate looking at an earlier run's OUT): one
# listing a fleet's 20,000 ledger parts is some 10 MB; a larger one is refused, not parsed.
MANIFEST_MOST = 256 << 20
# What a killed run's DuckDB may leave beside the case database: its spill folders (the swap
# replaces them with the rest of OUT).
SPILL_FOLDER = "case.duckdb.tmp"
STAGING = ".kvf-staging-"
PREVIOUS = ".kvf-previous-"
LOCK = ".kvf-lock"
_NO_LOCKS = frozenset({errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL})


def _sibling(out: Path, kind: str, pid: int) -> Path:
    return out.parent / f".{out.name}{kind}{pid}"


def _siblings(out: Path, kind: str) -> list[tuple[Path, int]]:
    prefix = f".{out.name}{kind}"
    found = []
    for entry in out.parent.iterdir():
        tail = entry.name[len(prefix) :]
        if entry.name.startswith(prefix) and tail.isdigit():
            found.append((entry, int(tail)))
    return sorted(found)


def _alive(pid: int) -> bool:
    """Whether the run of this pid may still be working: a process that has exited but is not
    yet reaped (a zombie, as a killed run is for a moment) is not."""
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # Linux: the state follows the command name in parentheses
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return True
    return state not in ("Z", "X")


def check_out(out: Path) -> Path:
    """The absolute OUT folder, checked before any work: not a file, holding nothing that
    kvforensics did not write, its parent writable (the staging folder goes there)."""
    out = Path(os.path.abspath(out))
    if out.is_symlink() and out.is_dir():
        out = out.resolve()
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out} is a file; give a folder (it is created if missing)")
    if out.is_dir():
        try:
            ours = KNOWN_NAMES | _listed_names(out)
            foreign = sorted(
                p.name for p in out.iterdir() if p.name not in ours and not _is_spill(p)
            )
        except PermissionError as exc:
            raise UsageError(f"--out {out} cannot be read ({exc.strerror})") from exc
        if foreign:
            shown = ", ".join(foreign[:5]) + (" …" if len(foreign) > 5 else "")
            raise UsageError(
                f"--out {out} holds files that kvforensics did not write ({shown}); a run "
                "replaces the whole folder, so give an empty or new folder"
            )
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--out {out}: cannot create its parent folder ({exc.strerror})") from exc
    if not os.access(out.parent, os.W_OK | os.X_OK) or (
        out.is_dir() and not os.access(out, os.W_OK | os.X_OK)
    ):
        raise UsageError(
            f"--out {out} is not writable (the run is built beside it in "
            f"{out.parent} and then swapped in)"
        )
    return out


def _is_spill(path: Path) -> bool:
    """Whether a path in OUT is a spill folder of the case database's DuckDB connections."""
    spill = path.name == SPILL_FOLDER or spill_pid("case.duckdb", path.name) is not None
    return spill and path.is_dir()


def _listed_names(out: Path) -> set[str]:
    """Top-level names of the outputs an earlier run's manifest lists (they are ours too)."""
    try:
        path = out / "manifest.json"
        if path.is_symlink() or path.stat().st_size > MANIFEST_MOST:
            return set()
        outputs = json_value(path.read_text(encoding="utf-8"))["outputs"]
        paths = [o["path"] if isinstance(o, dict) else o for o in outputs]
        return {str(p).split("/")[0] for p in paths if isinstance(p, str)}
    except (OSError, ValueError, KeyError, TypeError):
        return set()


@contextmanager
def held(out: Path) -> Iterator[None]:
    """Hold OUT's lock for the block, or stop with a UsageError naming the run that holds it.
    The lock file is removed at the end; a run that opened it meanwhile finds it gone and
    takes the new one (so two runs never hold two different files). Where the system or the
    file system has no locks (some network mounts), runs are not kept apart."""
    path = out.parent / f".{out.name}{LOCK}"
    fd = _locked(path, out)
    if fd is None:
        yield
        return
    try:
        started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        os.ftruncate(fd, 0)
        os.write(fd, f"pid {os.getpid()}, started {started}\n".encode())
        yield
    finally:
        os.unlink(path)
        os.close(fd)


def _locked(path: Path, out: Path) -> int | None:
    """The lock file, open and locked by this process; None where nothing can be locked."""
    try:
        import fcntl
    except ImportError:
        return None
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise UsageError(
                f"cannot create the lock {path} beside --out ({exc.strerror}); give a folder "
                "with a shorter name, in a writable place"
            ) from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 200).decode("utf-8", "replace").strip() or "unknown"
            os.close(fd)
            raise UsageError(
                f"--out {out} is being written by another kvforensics run ({holder}); wait "
                "for it to finish, or give another folder"
            ) from None
        except OSError as exc:
            os.close(fd)
            if exc.errno in _NO_LOCKS:  # nothing to hold: leave no file behind either
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
                return None
            raise
        try:
            same = os.path.samestat(os.fstat(fd), os.stat(path))
        except FileNotFoundError:
            same = False
        if same:
            return fd
        os.close(fd)  # removed by the run that held it while this one waited to open it


def recover(out: Path) -> None:
    """Put back a previous OUT left aside by a run killed between its two renames, and remove
    staging folders of runs that are no longer running."""
    if not out.parent.is_dir():
        return
    previous = _siblings(out, PREVIOUS)
    if not out.exists() and previous:
        os.rename(previous[-1][0], out)
        previous = previous[:-1]
    for path, pid in [*previous, *_siblings(out, STAGING)]:
        if not _alive(pid):
            shutil.rmtree(path, ignore_errors=True)


@contextmanager
def staged(out: Path) -> Iterator[Path]:
    """Yield a fresh staging folder beside OUT; swap it in when the block ends normally, remove
    it when the block raises. OUT must have passed check_out; OUT's lock is held throughout."""
    with held(out):
        recover(out)
        staging = _sibling(out, STAGING, os.getpid())
        shutil.rmtree(staging, ignore_errors=True)
        try:
            staging.mkdir()
        except OSError as exc:
            raise UsageError(f"cannot create {staging} beside --out ({exc.strerror})") from exc
        try:
            for name in ("case.duckdb", "case.duckdb.wal"):
                if (out / name).is_file():
                    shutil.copyfile(out / name, staging / name)
            yield staging
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        swap_in(staging, out)


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _sync_tree(folder: Path) -> None:
    """Flush the staged files to disk before they become OUT."""
    for base, _, files in os.walk(folder):
        for name in files:
            fd = os.open(os.path.join(base, name), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        _fsync_dir(Path(base))


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths atomically (renameat2 RENAME_EXCHANGE); False where not supported."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    result = renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange)
    if result == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False
    raise OSError(code, os.strerror(code), str(b))


def swap_in(staging: Path, out: Path) -> None:
    """Make the complete staging folder OUT; the previous OUT is removed."""
    _sync_tree(staging)
    if not out.exists():
        os.rename(staging, out)
        _fsync_dir(out.parent)
        return
    if _exchange(staging, out):
        _fsync_dir(out.parent)
        shutil.rmtree(staging, ignore_errors=True)  # now the previous run's files
        return
    previous = _sibling(out, PREVIOUS, os.getpid())
    os.rename(out, previous)
    os.rename(staging, out)
    _fsync_dir(out.parent)
    shutil.rmtree(previous, ignore_errors=True)


@contextmanager
def staged_parts(out: Path) -> Iterator[Path]:
    """For `kvforensics report`, whose OUT may hold other files (the case database, an
    investigate manifest): build the report's files in a staging folder, then put each of its
    top-level entries in place of OUT's entry of that name in one step (a folder such as
    notifications/ is exchanged whole, so no notice of an earlier run survives)."""
    out = Path(os.path.abspath(out))
    if out.is_symlink() and out.is_dir():  # as check_out: the lock is the real folder's
        out = out.resolve()
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out} is a file; give a folder (it is created if missing)")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--out {out}: cannot create it ({exc.strerror})") from exc
    if not os.access(out, os.W_OK | os.X_OK) or not os.access(out.parent, os.W_OK | os.X_OK):
        raise UsageError(f"--out {out} is not writable")
    with held(out):
        recover(out)
        staging = _sibling(out, STAGING, os.getpid())
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir()
        try:
            yield staging
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        _put_in_place(staging, out)


def _put_in_place(staging: Path, out: Path) -> None:
    """Each top-level entry of staging in place of OUT's entry of that name."""
    _sync_tree(staging)
    for entry in sorted(staging.iterdir()):
        target = out / entry.name
        if entry.is_dir() and target.is_dir() and _exchange(entry, target):
            shutil.rmtree(entry, ignore_errors=True)
        elif entry.is_dir() and target.exists():
            aside = _sibling(target, PREVIOUS, os.getpid())
            os.rename(target, aside)
            os.rename(entry, target)
            shutil.rmtree(aside, ignore_errors=True)
        else:
            os.replace(entry, target)
    _fsync_dir(out)
    shutil.rmtree(staging, ignore_errors=True)
