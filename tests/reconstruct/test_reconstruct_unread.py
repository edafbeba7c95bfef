"""Which first reads stay unmodelled: a stub no explored run read (each left it waiting for
pages at its first token) stays unread, and so does a request that is no stub; a stub that only
the logged order left waiting is taken over the runs that read it, and the node's note says
how many and over how many runs."""

from __future__ import annotations

from forensics.reconstruct.paged import _unread
from forensics.reconstruct.pagerun import Reads
from forensics.reconstruct.trace import Req


def _req(rid: str, stub: bool) -> Req:
    return Req(rid, "acct", 0, 10, 20, 64, 4, stub)


def test_only_stubs_no_run_read_stay_unread() -> None:
    reqs = [_req("plain", False), _req("never", True), _req("elsewhere", True), _req("x", True)]
    total = Reads()
    total.reads.update({2: 5, 3: 1})
    unread, note = _unread(reqs, {0, 1, 2}, total)
    assert unread == {0, 1}
    assert note.startswith("1 stub read(s) the logged order left waiting for pages")
    assert "(the first: elsewhere)" in note and "the 5 explored runs" in note


def test_nothing_to_say_when_every_waiting_stub_stays_unread() -> None:
    reqs = [_req("never", True)]
    assert _unread(reqs, {0}, Reads()) == ({0}, "")
    assert _unread(reqs, set(), Reads()) == (set(), "")
