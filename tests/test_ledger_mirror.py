"""The local copies of a ledger's remote parts (forensics.ledger.mirror) need the parts' size on
the disk they are made on. A disk without that room is said before any part is fetched, with
the sizes ingest recorded (the analysis) or the store's listing of the parts' folders (ingest's
checks); a disk that fills while the copies are written is said as such, never as a part that
cannot be read; either way no copy is left."""

from __future__ import annotations

import errno
import hashlib
import os
from pathlib import Path

import fsspec
import pytest

from forensics.errors import InputError
from forensics.ledger import mirror
from forensics.ledger.external import LedgerFile

ROOT = "/kvf-room"
PARTS = {
    "node=a/p1.parquet": b"x" * 10,
    "node=a/p2.parquet": b"y" * 20,
    "node=b/p.parquet": b"z" * 5,
}
NEED = 35  # the parts' bytes together


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
