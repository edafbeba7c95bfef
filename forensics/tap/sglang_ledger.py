"""Ledger events of an SGLang node, from the three levels of its KV memory:

- the token-slot allocator (`allocated`, `freed`): slots handed out and taken back; a free
  releases whole pages, and every request holding a page gets a `free` event for it;
- the request-to-token pool (`row`, `bound`): which request a row belongs to, and the slots
  written into its row. Slots fresh from the allocator become the request's `alloc`; slots that
  came from elsewhere (the radix cache's prefix) become a `share`;
- the scheduler's batches (`extend`, `decode`) and disaggregated transfers (`transfer`): the
  positions each request computed (`write`, source prefill, decode or transfer) and attended
  (`read`).

A request keeps holding its pages after it finishes while the radix cache keeps them, until the
allocator frees them. Position p of a request lies in page p div P at offset p mod P (P = the
page size; SGLang lays a request's tokens out page by page), so the events and content hashes
are those of `vllm_steps` with pages for blocks."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from forensics.tap.hashing import PrefixHashes
from forensics.tap.recorder import Recorder
from forensics.tap.vllm_steps import Event, Held, StepTracker

Entry = tuple[str, int, int, Sequence[int], int]  # request id, start, end, token ids, prompt len


class SGLangLedger:
    """One node's ledger; every method records its events at once, in call order."""

    def __init__(self, recorder: Recorder, page_size: int):
        self.rec = recorder
        self.ps = page_size
        self.tracker = StepTracker(page_size, randomised_ids=False)
        self.fresh: set[int] = set()
        self.rows: dict[int, str] = {}
        self.page_holders: dict[int, set[str]] = defaultdict(set)
        self.pending: dict[str, list[tuple[str, int]]] = defaultdict(list)

    # ---- allocator ----------------------------------------------------------------------------
    def allocated(self, slots: Sequence[int]) -> None:
        self.fresh.update(int(s) for s in slots)

    def freed(self, slots: Sequence[int]) -> None:
        pages = sorted({int(s) // self.ps for s in slots})
        events: list[Event] = []
        for rid in sorted({r for p in pages for r in self.page_holders.get(p, ())}):
            events += self._acquired(rid, None)
        touched: set[str] = set()
        for page in pages:
            for rid in sorted(self.page_holders.pop(page, ())):
                events.append((rid, "free", page * self.ps, self.ps, None, None, None))
                touched.add(rid)
            self.fresh.difference_update(range(page * self.ps, (page + 1) * self.ps))
        for rid in touched:  # forget a request once it holds nothing
            held = self.tracker.held[rid]
            if not any(rid in self.page_holders.get(p, ()) for p in held.blocks):
                del self.tracker.held[rid]
        self.rec.rows(events)

    # ---- request-to-token pool ----------------------------------------------------------------
    def row(self, row: int, rid: str) -> None:
        self.rows[row] = rid

    def bound(self, row: int, start: int, slots: Sequence[int]) -> None:
        """Slots written into the request's row for positions [start, start + len(slots))."""
        rid = self.rows.get(row)
        if rid is None or not len(slots):
            return
        held = self.tracker.held.get(rid)
        if held is None:
            held = self.tracker.held[rid] = Held(rid, hashes=PrefixHashes(self.ps))
        ps = self.ps
        for k in range(0, len(slots)):
            pos = start + k
            b, slot = pos // ps, int(slots[k])
            if b < len(held.blocks):
                continue  # a page the request already holds (its last page filling up)
            page = slot // ps
            held.blocks.append(page)
            shared = slot not in self.fresh
            self.fresh.difference_update(range(page * ps, (page + 1) * ps))
            self.page_holders[page].add(rid)
            self.pending[rid].append(("share" if shared else "alloc", b))
            if shared:
                held.hit_end = held.own_from = (b + 1) * ps

    # ---- batches and transfers ----------------------------------------------------------------
    def extend(self, entries: Sequence[Entry]) -> None:
        self._step(entries)

    def decode(self, entries: Sequence[Entry]) -> None:
        self._step(entries)

    def transfer(self, rid: str, start: int, end: int, tokens: Sequence[int]) -> None:
        """A disaggregated transfer wrote positions [start, end) into the request's slots."""
        held = self.tracker.held.get(rid)
        if held is None:
            return
        events = self._acquired(rid, tokens)
        held.own_from = min(held.own_from, start)
        events += [
            (r, op, s, c, p, "transfer", h)
            for (r, op, s, c, p, _src, h) in self.tracker.writes(held, tokens, start, end, end)
        ]
        self.rec.rows(events)

    def _step(self, entries: Sequence[Entry]) -> None:
        acquired: list[Event] = []
        writes: list[Event] = []
        reads: list[Event] = []
        for rid, start, end, tokens, prompt in entries:
            held = self.tracker.held.get(rid)
            if held is None:
                continue
            acquired += self._acquired(rid, tokens)
            writes += self.tracker.writes(held, tokens, start, end, prompt)
            reads += self.tracker.runs(held, "read", 0, end)
        shares = [e for e in acquired if e[1] == "share"]
        allocs = [e for e in acquired if e[1] != "share"]
        self.rec.rows(allocs + writes + shares + reads)

    def _acquired(self, rid: str, tokens: Sequence[int] | None) -> list[Event]:
        """The request's pages acquired since its last event, as alloc and share events."""
        held = self.tracker.held[rid]
        ps = self.ps
        events: list[Event] = []
        for op, b in self.pending.pop(rid, []):
            h = None
            if op == "share" and tokens is not None and len(tokens) >= (b + 1) * ps:
                h = held.hashes.of_block(tokens, b, (b + 1) * ps) if held.hashes else None
            events.append((rid, op, held.blocks[b] * ps, ps, b * ps, None, h))
        return events
