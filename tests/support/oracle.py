"""A deliberately naive, slot-by-slot reading of the exposure semantics, for tests only.

It follows docs/DESIGN.md §4 literally, with Python dicts keyed by slot, and is
independent of forensics.analysis (no shared code). Slow on purpose: never use it on real data.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

RANK = {"free": 0, "alloc": 1, "share": 2, "write": 3, "read": 4}


def ordered(events: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Events per node in the total order: (seq, input_order) when every event of the node has
    seq, else (ts, op rank, input_order)."""
    by_node: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for ev in events:
        by_node[ev["node"]].append(ev)
    out = {}
    for node, evs in by_node.items():
        if all(ev.get("seq") is not None for ev in evs):
            out[node] = sorted(evs, key=lambda e: (e["seq"], e["input_order"]))
        else:
            out[node] = sorted(evs, key=lambda e: (e["ts"], RANK[e["op"]], e["input_order"]))
    return out


@dataclass
class SlotFacts:
    """Everything the oracle found, slot by slot."""

    # (R, W, node, slot, kind) -> list of (read ts, write ts, leaker position, write source)
    exposures: dict[tuple, list[tuple]] = field(default_factory=lambda: defaultdict(list))
    # (R, node, violation, other, slot) -> list of event ts
    violations: dict[tuple, list[int]] = field(default_factory=lambda: defaultdict(list))
    # (R, node) -> category -> set of slots
    categories: dict[tuple, dict[str, set[int]]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(set))
    )
    reads: dict[tuple, int] = field(default_factory=lambda: defaultdict(int))
    # per event position in node order: (node, index, slot, outcome) for sweep-level checks
    per_read: set[tuple] = field(default_factory=set)
    # (node, index, slot, violation, other) for sweep-level checks
    per_violation: set[tuple] = field(default_factory=set)

    def violate(self, key: tuple, ts: int, index: int) -> None:
        r, node, kind, other, s = key
        self.violations[key].append(ts)
        self.per_violation.add((node, index, s, kind, other))


def _slots(ev: dict[str, Any]) -> range:
    return range(ev["slot_start"], ev["slot_start"] + ev["slot_count"])


def run(events: list[dict[str, Any]]) -> SlotFacts:
    facts = SlotFacts()
    for node, evs in ordered(events).items():
        _run_node(node, evs, facts)
    return facts


def _run_node(node: str, evs: list[dict[str, Any]], facts: SlotFacts) -> None:
    last_write: dict[int, tuple[int, dict[str, Any]]] = {}  # slot -> (order index, event)
    holders: dict[int, dict[str, tuple[int, dict[str, Any]]]] = defaultdict(dict)
    ever_held: dict[str, set[int]] = defaultdict(set)
    for i, ev in enumerate(evs):
        r, op = ev["request_id"], ev["op"]
        for s in _slots(ev):
            if op in ("alloc", "share"):
                if op == "alloc":
                    for q in sorted(holders[s]):
                        if q != r:
                            facts.violate((r, node, "double-allocation", q, s), ev["ts"], i)
                holders[s][r] = (i, ev)
                ever_held[r].add(s)
            elif op == "free":
                holders[s].pop(r, None)
            elif op == "write":
                if r not in holders[s]:
                    kind = "write-after-free" if s in ever_held[r] else "write-unheld"
                    for q in sorted(holders[s]) or [None]:
                        facts.violate((r, node, kind, q, s), ev["ts"], i)
                last_write[s] = (i, ev)
            elif op == "read":
                _read_slot(node, i, ev, s, last_write, holders, facts)
        if op == "read":
            facts.reads[(r, node)] += 1


def _read_slot(node, i, ev, s, last_write, holders, facts) -> None:
    r = ev["request_id"]
    cats = facts.categories[(r, node)]
    if r not in holders[s]:
        for q in sorted(holders[s]) or [None]:
            facts.violate((r, node, "read-unheld", q, s), ev["ts"], i)
    if s not in last_write:
        cats["uninitialised"].add(s)
        facts.per_read.add((node, i, s, "uninitialised", -1))
        return
    wi, wev = last_write[s]
    w = wev["request_id"]
    if w == r:
        cats["own"].add(s)
        facts.per_read.add((node, i, s, "own", -1))
        return
    held = holders[s].get(r)
    if held is not None and held[1]["op"] == "share" and held[0] > wi:
        hs, hw = held[1].get("content_hash"), wev.get("content_hash")
        if hs is None or hw is None:
            cats["shared_unverified"].add(s)
            facts.per_read.add((node, i, s, "shared_unverified", -1))
            return
        if hs == hw:
            cats["shared_verified"].add(s)
            facts.per_read.add((node, i, s, "shared_verified", -1))
            return
        kind = "prefix-mismatch"
    elif (held is not None and wi > held[0]) or w in holders[s]:
        kind = "overwritten"
    else:
        kind = "stale"
    cats["foreign"].add(s)
    facts.per_read.add((node, i, s, kind, wi))
    pos = wev["pos_start"] + (s - wev["slot_start"])
    facts.exposures[(r, w, node, s, kind)].append((ev["ts"], wev["ts"], pos, wev.get("source")))


def _runs(slots: list[int]) -> list[list[int]]:
    runs: list[list[int]] = []
    for s in sorted(set(slots)):
        if runs and runs[-1][-1] == s - 1:
            runs[-1].append(s)
        else:
            runs.append([s])
    return runs


def part_of(source: str | None, pos: int, prompt_tokens: int | None) -> str:
    if source in ("prefill", "transfer"):
        return "prompt"
    if source == "decode":
        return "generated"
    return "prompt" if prompt_tokens is None or pos < prompt_tokens else "generated"


def exposure_runs(facts: SlotFacts, prompt_tokens: dict[str, int]) -> set[tuple]:
    """(R, W, node, kind, slot_start, slot_count, pos_min, pos_max, part, first_read, last_read,
    first_write, last_write) per maximal run of distinct exposed slots."""
    groups: dict[tuple, list[int]] = defaultdict(list)
    for r, w, node, s, kind in facts.exposures:
        groups[(r, w, node, kind)].append(s)
    out = set()
    for (r, w, node, kind), slots in groups.items():
        for run in _runs(slots):
            seen = [x for s in run for x in facts.exposures[(r, w, node, s, kind)]]
            parts = {part_of(src, pos, prompt_tokens.get(w)) for (_, _, pos, src) in seen}
            part = parts.pop() if len(parts) == 1 else "mixed"
            out.add(
                (
                    r,
                    w,
                    node,
                    kind,
                    run[0],
                    len(run),
                    min(x[2] for x in seen),
                    max(x[2] for x in seen),
                    part,
                    min(x[0] for x in seen),
                    max(x[0] for x in seen),
                    min(x[1] for x in seen),
                    max(x[1] for x in seen),
                )
            )
    return out


def violation_runs(facts: SlotFacts) -> set[tuple]:
    """(R, node, violation, other, slot_start, slot_count, first_at, last_at) per run."""
    groups: dict[tuple, list[int]] = defaultdict(list)
    for r, node, kind, other, s in facts.violations:
        groups[(r, node, kind, other)].append(s)
    out = set()
    for key, slots in groups.items():
        for run in _runs(slots):
            times = [t for s in run for t in facts.violations[(*key, s)]]
            out.add((*key, run[0], len(run), min(times), max(times)))
    return out


def tokens(facts: SlotFacts) -> dict[tuple, int]:
    """(R, node, W) -> distinct slots: docs/DESIGN.md §6 token exposures."""
    combos = {(r, node, s, w) for (r, w, node, s, _kind) in facts.exposures}
    out: dict[tuple, int] = defaultdict(int)
    for r, node, _s, w in combos:
        out[(r, node, w)] += 1
    return dict(out)


def read_stats(facts: SlotFacts) -> set[tuple]:
    names = ("own", "shared_verified", "shared_unverified", "foreign", "uninitialised")
    return {
        (r, node, facts.reads[(r, node)], *(len(facts.categories[(r, node)][c]) for c in names))
        for (r, node) in facts.reads
    }
