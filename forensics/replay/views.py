"""What each step of a suspect read on one node, from the ledger: the first step's whole view,
then, per later step, only the positions whose source changed since the previous step read them.

A step is the suspect's reads that carry one timestamp (an engine records one step's events
together; one step may log several slot ranges). Its *frontier* is the last position it read:
on a node that runs prefill and decode (vLLM), a decode step feeding position q reads positions
0..q, the slot it has just written included; a disaggregated decode node may log only the slot
each step writes (the KV below it then stays as the previous step left it). The source of a
position is the last write into its slot before the read: (writer, writer position, written by a
`transfer`, held by the reader through a `share`), or None for a slot never written. Writes and
shares are applied in ledger order, so a slot another request overwrites while the suspect still
decodes shows up as a change at the first step that read it afterwards."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

# (writer, writer position, written by a transfer, held by the reader through a share), or None
Source = tuple[str, int, bool, bool] | None

# event columns, as queries/replay_node_events.sql returns them
_ORD, _OP, _REQ, _START, _COUNT, _POS, _TS, _SRC = range(8)


@dataclass
class StepViews:
    """`first`: the source of positions 0..positions-1 at the first step (None where not read);
    `later`: per later step in order, (frontier, [(position, source)] of the positions whose
    source differs from what the suspect last read there, or that it reads for the first time)."""

    first: list[Source]
    later: list[tuple[int, list[tuple[int, Source]]]] = field(default_factory=list)


def step_groups(events: list[tuple[Any, ...]]) -> list[set[int]]:
    """The ords of the suspect's read events, one set per step (reads sharing a timestamp)."""
    groups: dict[Any, set[int]] = {}
    for e in events:
        if e[_OP] == "read":
            groups.setdefault(e[_TS], set()).add(e[_ORD])
    return sorted(groups.values(), key=min)


def walk_steps(events: list[tuple[Any, ...]], positions: int, all_steps: bool = True) -> StepViews:
    """Apply writes (and the reader's shares) in order; at each step's reads note each read
    slot's source. Only the first step when `all_steps` is false."""
    groups = step_groups(events)
    if not all_steps:
        groups = groups[:1]
    group_of = {o: k for k, g in enumerate(groups) for o in g}
    read_ranges = [(e[_START], e[_START] + e[_COUNT]) for e in events if e[_ORD] in group_of]
    slots = np.unique(np.concatenate([np.arange(lo, hi) for lo, hi in read_ranges]))
    state = _SlotState(len(slots))
    width = max(
        [positions]
        + [
            int(e[_POS]) + int(e[_COUNT])
            for e in events
            if e[_ORD] in group_of and e[_POS] is not None
        ]
    )
    known = _Known(width)
    views = StepViews([None] * positions)
    last = max(group_of) if group_of else -1
    current = -1
    changes: list[tuple[int, Source]] = []
    frontier = -1
    for ord_, op, req, start, count, pos_start, _, source in events:
        if ord_ > last:
            break
        lo, hi = np.searchsorted(slots, [start, start + count])
        if hi <= lo:
            continue
        if op == "write":
            state.write(
                lo, hi, (str(req), source == "transfer"), pos_start + (slots[lo:hi] - start)
            )
        elif op == "share":
            state.shared[lo:hi] = True
        elif ord_ in group_of:
            step = group_of[ord_]
            if step != current:
                if current > 0:
                    views.later.append((frontier, sorted(changes, key=lambda c: c[0])))
                current, changes, frontier = step, [], -1
            pos = pos_start - start + slots[lo:hi]
            frontier = max(frontier, int(pos.max()))
            found = known.update(pos, state, lo, hi)
            if step == 0:
                for p, src in found:
                    if p < positions:
                        views.first[p] = src
            else:
                changes.extend(found)
    if current > 0:
        views.later.append((frontier, sorted(changes, key=lambda c: c[0])))
    return views


class _SlotState:
    """Per read slot: last writer (index into names), its position, and whether the reader
    holds the slot through a share."""

    def __init__(self, n: int):
        self.writer = np.full(n, -1, dtype=np.int64)
        self.wpos = np.zeros(n, dtype=np.int64)
        self.shared = np.zeros(n, dtype=bool)
        self.names: list[tuple[str, bool]] = []
        self.ids: dict[tuple[str, bool], int] = {}

    def write(self, lo: int, hi: int, name: tuple[str, bool], positions: np.ndarray) -> None:
        if name not in self.ids:
            self.ids[name] = len(self.names)
            self.names.append(name)
        self.writer[lo:hi] = self.ids[name]
        self.wpos[lo:hi] = positions

    def source(self, w: int, q: int, shared: bool) -> Source:
        if w < 0:
            return None
        name, transfer = self.names[w]
        return (name, q, transfer, shared)


class _Known:
    """What the reader last read at each position (writer id -2: not read yet)."""

    def __init__(self, width: int):
        self.writer = np.full(width, -2, dtype=np.int64)
        self.wpos = np.zeros(width, dtype=np.int64)
        self.shared = np.zeros(width, dtype=bool)

    def update(
        self, pos: np.ndarray, state: _SlotState, lo: int, hi: int
    ) -> list[tuple[int, Source]]:
        """Note the sources read at `pos` (slots lo..hi); returns those that differ."""
        keep = (pos >= 0) & (pos < len(self.writer))
        pos = pos[keep]
        writer = state.writer[lo:hi][keep]
        wpos = state.wpos[lo:hi][keep]
        shared = state.shared[lo:hi][keep]
        differs = (
            (self.writer[pos] != writer)
            | ((writer >= 0) & (self.wpos[pos] != wpos))
            | (self.shared[pos] != shared)
        )
        idx = np.flatnonzero(differs)
        self.writer[pos] = writer
        self.wpos[pos] = wpos
        self.shared[pos] = shared
        return [
            (int(pos[i]), state.source(int(writer[i]), int(wpos[i]), bool(shared[i])))
            for i in idx.tolist()
        ]
