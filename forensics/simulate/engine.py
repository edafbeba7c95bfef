"""A disaggregated SGLang cluster, event by event: prefill and decode nodes with their own paged
pools, a radix prefix cache on prefill, decode pre-allocation for the billed prompt, KV transfer
writes, decode steps, frees, and the four bugs.

The allocator's state changes (alloc, free, eviction) run in time order from a heap; writes and
reads are emitted when their request's timeline is known, with their own (later) timestamps.
Events go to an EventBuffer (ledger.py) that hands final, ordered chunks to a sink."""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from forensics.engines.engine_pool import make_pools
from forensics.engines.pools import CacheEntry, RadixCache
from forensics.simulate import ledger as L
from forensics.simulate.config import Scenario
from forensics.simulate.outcome import Outcome
from forensics.simulate.traffic import Traffic, prefix_hash, template_tokens
from forensics.simulate.waiting import LATER, RETRY_US, Waiting

PREALLOC, P_START, P_FREE, D_ABORT, D_START, D_FREE, LATE_TX = range(7)
RANK = {PREALLOC: 1, P_START: 1, P_FREE: 0, D_ABORT: 0, D_START: 1, D_FREE: 0, LATE_TX: 3}
LATE_TIMEOUT_US = 30_000_000  # a stuck transfer completes at the latest after this
Sink = Callable[[L.Chunk], None]


@dataclass
class Pending:
    """A request's state between its prefill start and its prefill free."""

    own: np.ndarray
    pages: np.ndarray
    entry: CacheEntry | None
    insert_key: int


class Engine:
    def __init__(
        self, sc: Scenario, traffic: Traffic, seed: int, sink: Sink, flush_rows: int = 1 << 20
    ):
        self.sc, self.tr, self.seed, self.sink = sc, traffic, seed, sink
        self.flush_rows = flush_rows
        self.page_size = sc.page_size
        self.names = sc.node_names()
        self.n_prefill = sc.prefill_nodes
        sizes = [sc.buffer_slots(role) for _, role in self.names]
        self.pools, self.driver = make_pools(sc.allocator, sizes, sc.page_size)
        self.caches = [RadixCache(self.pools[i]) for i in range(self.n_prefill)]
        self.held: list[dict[int, np.ndarray]] = [{} for _ in self.names]
        self.pending: dict[int, Pending] = {}
        self.late: list[dict[int, np.ndarray]] = [{} for _ in self.names]  # stuck transfers
        self.waiting = Waiting(len(self.names))  # pre-allocations waiting for decode pages
        self.buf = L.EventBuffer(len(self.names), capacity=flush_rows + (flush_rows >> 2))
        self.rng = np.random.default_rng([seed, 4])
        self.out = Outcome(len(traffic))
        self.hashes: list[str] = []
        self._hash_ids: dict[tuple[int, int], int] = {}
        self.logs: list[tuple[int, int, str]] = []
        self.heap: list[tuple[int, int, int, int, int, int]] = []
        # per-request values as Python lists: scalar reads from numpy are slow in the hot path
        self.prompt: list[int] = traffic.prompt_len.tolist()
        self.tlen: list[int] = traffic.template_len.tolist()
        self.tpl: list[int] = traffic.template.tolist()
        self.pnode: list[int] = traffic.prefill_node.tolist()
        self.dnode: list[int] = (traffic.decode_node + sc.prefill_nodes).tolist()
        self.outlen: list[int] = traffic.output_len.tolist()
        self.abort: list[bool] = traffic.abort.tolist()
        self.batch_gap: list[int] = (
            (2_000 + self.rng.exponential(15_000, len(traffic))).astype(np.int64).tolist()
        )  # from transfer done to the decode batch that takes the request
        self.late_bug = sc.bug("late-transfer")
        self._counter = 0

    # ---- plumbing -------------------------------------------------------------------------
    def push(self, t: int, kind: int, i: int, extra: int = 0) -> None:
        self._counter += 1
        heapq.heappush(self.heap, (t, RANK[kind], self._counter, kind, i, extra))

    def retry_waiting(self, d: int, t: int) -> None:
        """Pages came back on decode node d at time t: the next tries of the requests now
        satisfied."""
        for at, i, order in self.waiting.due(d, t, self.pools[d].free_pages):
            heapq.heappush(self.heap, (at, RANK[PREALLOC], LATER + order, PREALLOC, i, order))

    def hash_id(self, tpl: int, length: int) -> int:
        key = (tpl, length)
        if key not in self._hash_ids:
            tokens = template_tokens(
                self.seed,
                tpl,
                int(self.tr.template_lengths[tpl]),
                self.sc.vocab_size,
                self.tr.words,
            )[:length]
            self._hash_ids[key] = len(self.hashes)
            self.hashes.append(prefix_hash(tokens))
        return self._hash_ids[key]

    def log(self, t: int, node: int, text: str) -> None:
        self.logs.append((t, node, text))

    def usage(self, node: int) -> float:
        pool = self.pools[node]
        return 1.0 - pool.free_pages / max(1, pool.n_pages - 1)

    # ---- the run ----------------------------------------------------------------------------
    def run(self) -> Outcome:
        for i in range(len(self.tr)):
            self.admit(i)
        handlers = (
            self.prealloc,
            self.p_start,
            self.p_free,
            self.d_abort,
            self.d_start,
            self.d_free,
            self.late_tx,
        )
        next_flush = self.flush_rows
        while self.heap:
            t, _, _, kind, i, extra = heapq.heappop(self.heap)
            if self.buf.n >= next_flush:
                self.sink(self.buf.flush(before=t))
                next_flush = self.buf.n + self.flush_rows  # future events stay buffered
            handlers[kind](t, i, extra)
        self.sink(self.buf.flush())
        if self.driver is not None:
            self.driver.close()
        return self.out

    def admit(self, i: int) -> None:
        """Gateway and admission: over-long prompts are stubbed (bug) or refused (HTTP 400)."""
        sc, t = self.sc, int(self.tr.arrival_us[i])
        prompt = self.prompt[i]
        if prompt > sc.max_prefill_tokens:
            fixed = sc.fixed_at is not None and t >= int(sc.fixed_at.timestamp() * 1e6)
            if not sc.bug("oversize-stub") or fixed:
                self.log(
                    t + 1_000,
                    self.pnode[i],
                    f"Input length ({prompt} tokens) exceeds the maximum allowed length "
                    f"({sc.max_prefill_tokens} tokens). Use a shorter input or enable "
                    "--allow-auto-truncate.",
                )
                self.out.status[i] = 400
                self.out.completed_us[i] = t + 1_500
                return
            self.out.stub[i] = True
        self.push(t + 2_000, PREALLOC, i)

    def n_proc(self, i: int) -> int:
        return 1 if self.out.stub[i] else self.prompt[i]

    def decode_node(self, i: int) -> int:
        return self.dnode[i]

    # ---- decode pre-allocation ------------------------------------------------------------
    def prealloc(self, t: int, i: int, order: int) -> None:
        """Decode allocates pages for the full billed prompt, from its own copy of the request;
        with too few free pages it waits (forensics.simulate.waiting; `order`: its place in
        line once it has waited)."""
        d, ps = self.decode_node(i), self.sc.page_size
        k = -(-self.prompt[i] // ps)
        pages = self.pools[d].alloc(k)
        if pages is None:
            self.waiting.wait(d, i, t, k, order)
            return
        if self.sc.bug("double-alloc") and self.rng.random() < self.sc.double_alloc_rate:
            pages = self.steal_page(d, pages)
        self.held[d][i] = pages
        self.buf.runs(pages, 0, len(pages) * ps, ps, t, d, i, L.ALLOC)
        self.push(t + 1_000, P_START, i)

    def steal_page(self, d: int, pages: np.ndarray) -> np.ndarray:
        """The double-allocation bug: one page of the new allocation is a page that another
        live request still holds."""
        pool = self.pools[d]
        waiting = [v for v in self.held[d] if self.out.decode_start_us[v] < 0]
        victims = sorted(waiting or self.held[d])  # prefer requests that will still read
        if not victims:
            return pages
        victim = self.held[d][victims[int(self.rng.integers(len(victims)))]]
        single = victim[pool.refs[victim] == 1]
        if len(single) == 0:
            return pages
        stolen = int(single[int(self.rng.integers(len(single)))])
        pool.release(pages[-1:])
        pool.take(stolen)
        at = int(self.rng.integers(len(pages)))
        return np.concatenate((pages[:at], [stolen], pages[at:-1])).astype(np.int64)

    # ---- prefill ---------------------------------------------------------------------------
    def lookup(self, i: int, p: int, m: int) -> CacheEntry | None:
        """Radix lookup of the request's page-aligned prefix (m pages); the prefix-collision bug
        returns another prefix's entry, as a weak hash would."""
        cache, tpl = self.caches[p], self.tpl[i]
        if m == 0:
            return None
        if self.sc.bug("prefix-collision") and self.rng.random() < self.sc.prefix_collision_rate:
            others = [k for k, e in cache.entries.items() if k != tpl and len(e.pages) <= m]
            if others:
                self.out.collided[i] = True
                return cache.lookup(others[int(self.rng.integers(len(others)))])
        return cache.lookup(tpl)

    def p_start(self, t: int, i: int, _: int) -> None:
        """Prefill: share the cached prefix, allocate the rest, write and read the processed
        tokens, then transfer them into the pages decode chose (unless decode gave up)."""
        p, ps = self.pnode[i], self.page_size
        m = 0 if self.out.stub[i] else self.tlen[i] // ps
        entry = self.lookup(i, p, m)
        got = self.prefill_pages(t, i, p, entry)
        if got is None:
            return
        own, pages = got
        ms = len(pages) * ps - len(own) * ps
        tpl = self.tpl[i]
        if ms:
            self.buf.runs(pages, 0, ms, ps, t, p, i, L.SHARE, hash_id=self.hash_id(tpl, ms))
        self.buf.runs(pages, ms, len(pages) * ps, ps, t, p, i, L.ALLOC)
        if self.out.stub[i]:
            self.log(
                t,
                p,
                f"Request {self.tr.request_ids[i]} exceeds the maximum number of "
                f"tokens: {self.prompt[i]} > {self.sc.max_prefill_tokens}",
            )
        insert = entry is None and m > 0
        n = self.n_proc(i)
        tw = t + 15_000 + int((n - ms) / self.sc.prefill_tokens_per_s * 1e6)
        if insert:  # the prefix this request's pages will leave in the radix cache
            self.buf.runs(
                pages, 0, m * ps, ps, tw, p, i, L.WRITE, L.SRC_PREFILL, self.hash_id(tpl, m * ps)
            )
        self.buf.runs(pages, m * ps if insert else ms, n, ps, tw, p, i, L.WRITE, L.SRC_PREFILL)
        self.buf.runs(pages, 0, n, ps, tw + 1, p, i, L.READ)
        self.out.cached_tokens[i] = ms
        self.log_prefill(t, tw, p, n - ms, ms)
        t_tx = tw + 2 + 2_000 + int(n / self.sc.transfer_tokens_per_s * 1e6)
        self.pending[i] = Pending(own, pages, entry, tpl if insert else -1)
        self.push(t_tx + 1, P_FREE, i)
        self.transfer(t, t_tx, i, n)

    def prefill_pages(
        self, t: int, i: int, p: int, entry: CacheEntry | None
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """(own pages, all pages) for the processed tokens after the shared prefix, evicting
        idle cache entries if needed; None (and a retry later) when the pool is too full."""
        shared = entry.pages if entry is not None else np.empty(0, np.int64)
        need = -(-self.n_proc(i) // self.page_size) - len(shared)
        if entry is not None:
            entry.sharers += 1  # protects the entry from eviction while this request runs
        own = self.pools[p].alloc(need)
        if own is None:
            self.caches[p].evict_for(need)
            own = self.pools[p].alloc(need)
        if own is None:
            if entry is not None:
                entry.sharers -= 1
            self.push(t + RETRY_US, P_START, i)
            return None
        pages = np.concatenate((shared, own))
        self.held[p][i] = pages
        return own, pages

    def transfer(self, t: int, t_tx: int, i: int, n: int) -> None:
        """The KV transfer into decode's pages and the decode start; with the late-transfer
        bug an aborting request's decode frees its pages before the transfer lands."""
        d = self.decode_node(i)
        if self.late_bug and self.abort[i] and not self.out.stub[i]:
            self.push(t + 1 + int(self.rng.random() * (t_tx - t - 2)), D_ABORT, i)
            return
        self.buf.runs(self.held[d][i], 0, n, self.page_size, t_tx, d, i, L.WRITE, L.SRC_TRANSFER)
        self.land_late(t_tx + 100, d, self.held[d][i])
        self.push(t_tx + self.batch_gap[i], D_START, i)

    def log_prefill(self, t: int, tw: int, p: int, new: int, cached: int) -> None:
        rate = new / max(1e-6, (tw - t) / 1e6)
        self.log(
            tw,
            p,
            f"Prefill batch, #new-seq: 1, #new-token: {new}, #cached-token: "
            f"{cached}, token usage: {self.usage(p):.2f}, #running-req: "
            f"{len(self.held[p])}, #queue-req: 0, input throughput (token/s): {rate:.2f}",
        )

    def p_free(self, t: int, i: int, _: int) -> None:
        """The request leaves prefill; its prefix pages stay in the radix cache."""
        p, ps = self.pnode[i], self.sc.page_size
        st = self.pending.pop(i)
        del self.held[p][i]
        self.buf.runs(st.pages, 0, len(st.pages) * ps, ps, t, p, i, L.FREE)
        if st.entry is not None:
            st.entry.sharers -= 1
        cache = self.caches[p]
        if st.insert_key >= 0 and st.insert_key not in cache.entries:
            m = self.tlen[i] // ps
            cache.insert(
                st.insert_key, CacheEntry(st.own[:m].copy(), i, self.hash_id(st.insert_key, m * ps))
            )
        self.pools[p].release(st.own)

    # ---- decode ------------------------------------------------------------------------------
    def d_start(self, t: int, i: int, _: int) -> None:
        """First decode step: one read over the whole billed prompt; then every step writes the
        KV of the token it feeds and reads that slot. The pages the steps will fill are reserved
        now (as decode's admission reserves headroom) and each is logged as allocated when its
        first token is written. Without enough free pages the output is cut short."""
        d, ps, tpot = self.decode_node(i), self.sc.page_size, self.sc.tpot_us
        prompt = self.prompt[i]
        pages = self.held[d][i]
        self.buf.runs(pages, 0, prompt, ps, t, d, i, L.READ)
        n_out = self.outlen[i]
        grow = -(-(prompt + n_out - 1) // ps) - len(pages)
        pool = self.pools[d]
        if grow > pool.free_pages:
            grow = pool.free_pages
            n_out = max(1, min(n_out, (len(pages) + grow) * ps - prompt + 1))
        self.out.decode_start_us[i] = t
        self.out.first_token_us[i] = t + 200
        self.out.n_out[i] = n_out
        live = self.held[d]
        tokens = sum(len(v) for v in live.values()) * ps
        self.log(
            t,
            d,
            f"Decode batch, #running-req: {len(live)}, #token: {tokens}, token usage: "
            f"{self.usage(d):.2f}, cuda graph: True, gen throughput (token/s): "
            f"{len(live) * 1e6 / tpot:.2f}, #queue-req: 0",
        )
        end = prompt + n_out - 1  # positions prompt .. end-1 are written by decode steps
        first_new = len(pages)
        if grow > 0 and end > len(pages) * ps:
            extra = pool.alloc(-(-end // ps) - len(pages))
            assert extra is not None
            pages = self.held[d][i] = np.concatenate((pages, extra))
        self.buf.steps(pages, first_new, prompt, end, t, tpot, ps, d, i)
        self.push(t + (end - prompt) * tpot + 1_000, D_FREE, i)

    def d_free(self, t: int, i: int, _: int) -> None:
        d, ps = self.decode_node(i), self.sc.page_size
        pages = self.held[d].pop(i)
        self.buf.runs(pages, 0, len(pages) * ps, ps, t, d, i, L.FREE)
        self.pools[d].release(pages)
        self.retry_waiting(d, t)
        self.out.completed_us[i] = t + 500

    def d_abort(self, t: int, i: int, _: int) -> None:
        """The late-transfer bug: decode gives the request up and frees its pages while the
        prefill's transfer is still on its way; the transfer lands in them anyway."""
        d, ps = self.decode_node(i), self.sc.page_size
        pages = self.held[d].pop(i)
        self.buf.runs(pages, 0, len(pages) * ps, ps, t, d, i, L.FREE)
        self.pools[d].release(pages)
        self.retry_waiting(d, t)
        self.out.status[i] = 499
        self.out.completed_us[i] = t + 100
        self.late[d][i] = pages
        self.push(t + LATE_TIMEOUT_US, LATE_TX, i)

    def land_late(self, t: int, d: int, pages: np.ndarray) -> None:
        """Stuck transfers into pages that a new request now holds complete right after that
        request's own transfer, before its first decode read (the race of sglang#24527)."""
        for w in sorted(self.late[d]):
            if np.intersect1d(self.late[d][w], pages).size:
                self.late_tx(t, w, 0)

    def late_tx(self, t: int, i: int, _: int) -> None:
        """The aborted request's transfer lands in the pages decode already freed."""
        d = self.decode_node(i)
        pages = self.late[d].pop(i, None)
        if pages is not None:
            self.buf.runs(
                pages, 0, self.n_proc(i), self.page_size, t, d, i, L.WRITE, L.SRC_TRANSFER
            )
