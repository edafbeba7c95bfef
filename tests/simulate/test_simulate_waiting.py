"""Pre-allocations waiting for decode pages (forensics.simulate.waiting): a request that finds
too few free pages gets its next try only when pages come back and enough are free for it. The
oracle is the plain rule it stands for: try again every RETRY_US until the pages are there, each
try after the other events of its microsecond, first come first served. Both must write the same
ledger, byte for byte, with every engine bug on and the decode pools short."""

from __future__ import annotations

import hashlib
import heapq
from pathlib import Path

import pytest

import forensics.simulate.run as sim_run
from forensics.simulate import engine
from forensics.simulate.run import SimOptions, simulate
from forensics.simulate.waiting import LATER, RETRY_US, Waiting

BUGS = frozenset({"oversize-stub", "double-alloc", "late-transfer", "prefix-collision"})


class Polling(engine.Engine):
    """The oracle: a request short of pages tries again on every beat."""

    tries = 0

    def prealloc(self, t: int, i: int, order: int) -> None:
        d, need = self.decode_node(i), -(-self.prompt[i] // self.sc.page_size)
        if self.pools[d].free_pages < need:
            Polling.tries += 1
            order = order or (t << 32 | i)
            entry = (t + RETRY_US, engine.RANK[engine.PREALLOC], LATER + order)
            heapq.heappush(self.heap, (*entry, engine.PREALLOC, i, order))
            return
        super().prealloc(t, i, order)

    def retry_waiting(self, d: int, t: int) -> None:
        """Nobody waits: every try is on the heap already."""


def _files(folder: Path) -> dict[str, str]:
    return {
        p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.mark.parametrize("seed", [3, 11])
def test_waiting_writes_the_ledger_of_trying_every_beat(tmp_path, monkeypatch, seed) -> None:
    opts = SimOptions(
        requests=240,
        seed=seed,
        bugs=BUGS,
        truth=False,
        contents=False,
        days=0.012,
        overrides=(("long_share", 0.5), ("long_low", 0.2)),  # the bench's long mix
    )
    simulate(tmp_path / "waiting", opts)
    Polling.tries = 0
    monkeypatch.setattr(sim_run, "Engine", Polling)
    simulate(tmp_path / "polling", opts)
    assert Polling.tries > 200  # decode pages ran short, again and again
    assert _files(tmp_path / "waiting") == _files(tmp_path / "polling")


def test_a_release_lets_in_only_who_fits_on_their_own_beat() -> None:
    w = Waiting(2)
    w.wait(1, 7, 1_000, 50, 0)
    w.wait(1, 3, 5_000, 10, 0)
    w.wait(1, 9, 2_000, 10, 0)
    w.wait(0, 4, 2_000, 1, 0)  # another node: not its pages
    w.wait(1, 8, 61_000, 10, 999)  # waited before: keeps its place
    # 20 pages come back at 61_000 on node 1: the three that need 10 pages, in line order
    assert w.due(1, 61_000, 20) == [
        (81_000, 8, 999),  # its last try was at 61_000 itself: the next beat
        (62_000, 9, 2_000 << 32 | 9),
        (65_000, 3, 5_000 << 32 | 3),
    ]
    assert w.due(1, 70_000, 49) == []
    assert w.due(1, 70_000, 50) == [(81_000, 7, 1_000 << 32 | 7)]
    assert w.due(0, 70_000, 1) == [(82_000, 4, 2_000 << 32 | 4)]
