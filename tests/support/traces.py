"""Requests of a rebuilt node trace written by hand, times in milliseconds."""

from __future__ import annotations

from forensics.reconstruct.trace import Req

MS = 1_000  # microseconds in a millisecond


def req(
    rid: str,
    acc: str,
    recv: int,
    first: int,
    done: int,
    prompt: int,
    n_out: int,
    stub: bool = False,
) -> Req:
    """A request received at `recv` ms, first token at `first`, done at `done`."""
    return Req(rid, acc, recv * MS, first * MS, done * MS, prompt, n_out, stub)
