"""Ledger events of vLLM V1 scheduler steps: which blocks each request got (prefix-cache hits
as `share`, the rest as `alloc`), the tokens each step computed into their slots (`write`),
the slots each step attended (`read`) and the blocks a request gave back (`free`).

Slot s of the node's pool is token `s mod B` of block `s div B` (B = the block size), so a
block is the slot range [block × B, block × B + B). Only the first KV cache group is followed
(the full-attention layers of a plain decoder model). Content hashes come from
`forensics.tap.hashing`, computed from the request's token ids.

A write that fills a block's last slot covers the whole part of the block the request computed
itself and carries the full block's identity, so that a later prefix-cache `share` of that
block can be checked against it; any other write covers the positions the step computed and
carries the identity of the partial block."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from forensics.tap.hashing import PrefixHashes

# (request_id, op, slot_start, slot_count, pos_start, source, content_hash)
Event = tuple[str, str, int, int, int | None, str | None, str | None]

Lookup = Callable[[str], tuple[Sequence[int], int] | None]

# vLLM makes an incoming request id unique by appending "-" and 8 random hex digits.
_SUFFIX = re.compile(r"^(.+)-[0-9a-f]{8}$")


def external_id(internal: str, randomised: bool = True) -> str:
    """The request id the caller gave (the engine's id without its random suffix)."""
    if randomised and (m := _SUFFIX.match(internal)):
        return m.group(1)
    return internal


@dataclass
class Held:
    """What the tap knows of one request's KV on this node."""

    rid: str
    blocks: list[int] = field(default_factory=list)
    hit_end: int = 0  # positions [0, hit_end) came from prefix-cache hits
    own_from: int = 0  # first position the request computed itself
    hashes: PrefixHashes | None = None


class StepTracker:
    """Turns scheduler steps into ledger events; one per engine-core scheduler."""

    def __init__(self, block_size: int, randomised_ids: bool = True):
        self.bs = block_size
        self.randomised = randomised_ids
        self.held: dict[str, Held] = {}
        self.hits: dict[str, list[int]] = {}
        # Freed before their first step was recorded (preempted while that step was in flight).
        self.gone: set[str] = set()

    # ---- hooks --------------------------------------------------------------------------------
    def hit(self, req_id: str, block_ids: Sequence[int]) -> None:
        """A prefix-cache lookup found these blocks (the latest lookup of a request counts)."""
        self.hits[req_id] = list(block_ids)

    def step(self, out: Any, lookup: Lookup) -> list[Event]:
        """Events of one executed step, from its SchedulerOutput; `lookup(req_id)` gives the
        request's token ids so far (prompt then output) and its prompt length, None for a
        request the engine no longer has."""

        def tokens_of(req_id: str) -> Sequence[int] | None:
            found = lookup(req_id)
            return None if found is None else found[0]

        acquire: list[Event] = []
        start: dict[str, int] = {}
        for new in out.scheduled_new_reqs:
            if new.req_id in self.gone:
                self.gone.discard(new.req_id)
                continue
            acquire += self._acquire(new.req_id, _group0(new.block_ids), tokens_of, True)
            start[new.req_id] = self.held[new.req_id].own_from = new.num_computed_tokens
        cached = out.scheduled_cached_reqs
        resumed: set[str] = getattr(cached, "resumed_req_ids", set()) or set()
        for i, req_id in enumerate(cached.req_ids):
            ids = _group0(cached.new_block_ids[i]) if cached.new_block_ids[i] else []
            if req_id in resumed:
                acquire += self._acquire(req_id, ids, tokens_of, True)
                self.held[req_id].own_from = cached.num_computed_tokens[i]
            elif ids and req_id in self.held:
                acquire += self._acquire(req_id, ids, tokens_of, False)
            start[req_id] = cached.num_computed_tokens[i]
        writes: list[Event] = []
        reads: list[Event] = []
        for req_id, n in out.num_scheduled_tokens.items():
            held = self.held.get(req_id)
            found = lookup(req_id)
            if held is None or found is None or req_id not in start:
                continue  # finished (freed) before its step was recorded: the work is discarded
            tokens, prompt = found
            n -= len(out.scheduled_spec_decode_tokens.get(req_id, ()))
            p0, p1 = start[req_id], start[req_id] + n
            writes += self.writes(held, tokens, p0, p1, prompt)
            reads += self.runs(held, "read", 0, p1)
        # Shares go after the step's writes: vLLM hands out a prefix-cache hit on blocks that
        # another request of the same step is computing, and a step writes every request's KV
        # (layer by layer) before attention reads it.
        shares = [e for e in acquire if e[1] == "share"]
        allocs = [e for e in acquire if e[1] != "share"]
        return allocs + writes + shares + reads

    def free(self, req_id: str) -> list[Event]:
        """The request gave back its blocks (finished, aborted or preempted)."""
        self.hits.pop(req_id, None)
        held = self.held.pop(req_id, None)
        if held is None:
            if len(self.gone) > 4096:  # requests aborted before their first step: forget them
                self.gone.clear()
            self.gone.add(req_id)
            return []
        return self.runs(held, "free", 0, len(held.blocks) * self.bs, with_pos=False)

    # ---- events ---------------------------------------------------------------------------------
    def _acquire(self, req_id: str, ids: list[int], tokens_of: Callable, new: bool) -> list[Event]:
        bs = self.bs
        if new:
            held = Held(external_id(req_id, self.randomised), hashes=PrefixHashes(bs))
            self.held[req_id] = held
            hits = self.hits.pop(req_id, [])
            n_hit = 0
            while n_hit < min(len(hits), len(ids)) and hits[n_hit] == ids[n_hit]:
                n_hit += 1
            held.hit_end = held.own_from = n_hit * bs
        else:
            held, n_hit = self.held[req_id], 0
        first = len(held.blocks)
        held.blocks.extend(ids)
        events: list[Event] = []
        tokens = tokens_of(req_id) if n_hit else None
        for b in range(first, first + n_hit):
            h = held.hashes.of_block(tokens, b, (b + 1) * bs) if held.hashes and tokens else None
            events.append((held.rid, "share", held.blocks[b] * bs, bs, b * bs, None, h))
        events += self._block_runs(held, "alloc", first + n_hit, len(held.blocks))
        return events

    def writes(
        self, held: Held, tokens: Sequence[int], p0: int, p1: int, prompt: int
    ) -> list[Event]:
        bs = self.bs
        events: list[Event] = []
        p = p0
        while p < p1:
            b = p // bs
            if b >= len(held.blocks):
                break
            end = min(p1, (b + 1) * bs)
            if p < prompt < end:
                end = prompt  # a step crossing the end of the prompt: prefill, then decode
            source = "prefill" if p < prompt else "decode"
            # A write closing the block restates the block's part this request computed.
            first = max(b * bs, held.own_from) if end == (b + 1) * bs else p
            h = None
            if held.hashes is not None and len(tokens) >= end:
                h = held.hashes.of_block(tokens, b, end)
            slot = held.blocks[b] * bs + first - b * bs
            events.append((held.rid, "write", slot, end - first, first, source, h))
            p = end
        return events

    def runs(self, held: Held, op: str, p0: int, p1: int, with_pos: bool = True) -> list[Event]:
        """One event per contiguous slot run holding positions [p0, p1)."""
        bs = self.bs
        events: list[Event] = []
        p = p0
        while p < p1:
            b = p // bs
            if b >= len(held.blocks):
                break
            run_start, slot = p, held.blocks[b] * bs + p % bs
            end = min(p1, (b + 1) * bs)
            blocks = held.blocks
            while end < p1 and b + 1 < len(blocks) and blocks[b + 1] == blocks[b] + 1:
                b += 1
                end = min(p1, (b + 1) * bs)
            if held.blocks[run_start // bs] != 0:  # block 0 is the engine's null placeholder
                pos = run_start if with_pos else None
                events.append((held.rid, op, slot, end - run_start, pos, None, None))
            p = end
        return events

    def _block_runs(self, held: Held, op: str, b0: int, b1: int) -> list[Event]:
        return self.runs(held, op, b0 * self.bs, b1 * self.bs)


def _group0(block_ids: Any) -> list[int]:
    """Block ids of the first KV cache group (vLLM gives a tuple of lists, one per group)."""
    if not block_ids:
        return []
    first = block_ids[0]
    return list(first) if isinstance(first, (list, tuple)) else list(block_ids)
