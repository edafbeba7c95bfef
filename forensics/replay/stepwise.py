"""Greedy decoding that follows a suspect's steps: each step attends the KV that step read.

On a node that runs prefill and decode (vLLM), the suspect's first step computes its prompt
positions (all of them, those after a prefix-cache hit, or a stub's last token) over whatever KV
its other positions held: those are rebuilt from the ledger, the computed positions are fed at
their own positions, and the first output token is that step's argmax. Where the prefill ran on
another node (disaggregated serving), the first token is given and the whole prompt's KV is
rebuilt as the first decode read saw it.

Then every generated token is fed at the next position. Before the step that feeds position q,
the positions whose KV the ledger says changed by that step's read (a slot overwritten by another
request while the suspect still decodes) are replaced in the cache by the new writer's KV (or
zeros), so each step attends what it read. The suspect's own KV at the positions it computed is
what the replay itself computed there, over the contaminated KV, as in the engine.

With the delivered tokens known, they are fed (teacher-forced) in one forward pass per stretch
between two changes and scored, as forensics.replay.decode does: the greedy choices are known at
every position (exactly greedy decoding while they agree with the delivered tokens) and are kept
up to the first that differs."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import torch

from forensics.replay import attention, hfcompat
from forensics.replay.decode import (
    CHUNK_TOKENS,
    KV,
    DecodeResult,
    WriterStore,
    attribute_shares,
    input_device,
    zero_kv,
)
from forensics.replay.evidence import TokenScores, score
from forensics.replay.ledger import Slot, SuspectPlan


class _Cache:
    """The replay's KV cache and, per position, the slot whose KV it holds. KV the request
    computed itself that a later change overwrites is kept aside (`own_kv`)."""

    def __init__(self, model: Any, plan: SuspectPlan, store: WriterStore, chunk: int | None):
        self.model = model
        self.plan = plan
        self.store = store
        self.chunk = chunk
        self.kv = hfcompat.new_cache()
        self.labels: list[Slot] = []
        self.forwarded = 0
        self.kept: dict[int, tuple[list[torch.Tensor], list[torch.Tensor]]] = {}
        self.writer_kvs: dict[str, KV] = {}

    def place(self, slots: Sequence[Slot]) -> None:
        """Start the cache with the rebuilt KV of `slots` (positions 0..len-1)."""
        if not slots:
            return
        keys, values = zero_kv(self.model, len(slots))
        for layer, (k, v) in enumerate(zip(keys, values, strict=True)):
            self.kv.update(k, v, layer)
        self.labels = [None] * len(slots)
        self.patch(list(enumerate(slots)))

    def feed(self, tokens: Sequence[int], start: int, every_logit: bool = False) -> torch.Tensor:
        """Run tokens at positions start.. (chunked), extending the cache; the logits (the last
        position's, or every position's with every_logit, in one pass)."""
        device = input_device(self.model)
        ids = torch.tensor([list(tokens)], dtype=torch.long, device=device)
        step = len(tokens) if every_logit else max(1, int(self.chunk or CHUNK_TOKENS))
        logits = torch.empty(0)
        for lo in range(0, len(tokens), step):
            piece = ids[:, lo : lo + step]
            positions = torch.arange(start + lo, start + lo + piece.shape[1], device=device)
            out = hfcompat.forward(self.model, piece, positions.unsqueeze(0), self.kv, every_logit)
            logits = out.logits[0].float() if every_logit else out.logits[0, -1].float()
            del out
        self.forwarded += len(tokens)
        own = self.plan.request_id
        self.labels += [(own, start + i) for i in range(len(tokens))]
        return logits

    def patch(self, changes: Sequence[tuple[int, Slot]]) -> None:
        """Put each changed position's new KV (its writer's, or zeros) into the cache."""
        todo: dict[str | None, tuple[list[int], list[int]]] = defaultdict(lambda: ([], []))
        own = self.plan.request_id
        for p, slot in changes:
            if p < len(self.labels) and self.labels[p] != slot:
                if self.labels[p] == (own, p):
                    self.kept[p] = self._at(p)
                todo[None if slot is None else slot[0]][0].append(p)
                todo[None if slot is None else slot[0]][1].append(0 if slot is None else slot[1])
                self.labels[p] = slot
        for writer, (dst, src) in sorted(todo.items(), key=lambda w: str(w[0])):
            source = None if writer is None else self.writer_kv(writer, max(src) + 1)
            for layer in range(hfcompat.layer_count(self.model)):
                keys, values = hfcompat.layer_kv(self.kv, layer)
                at = torch.tensor(dst, device=keys.device)
                if source is None:
                    keys.index_fill_(2, at, 0.0)
                    values.index_fill_(2, at, 0.0)
                else:
                    take = torch.tensor(src, device=keys.device)
                    keys.index_copy_(2, at, source[0][layer].index_select(2, take))
                    values.index_copy_(2, at, source[1][layer].index_select(2, take))

    def writer_kv(self, writer: str, count: int) -> KV:
        """A writer's KV at positions 0..count-1 at least: replayed through its own steps when
        its plan says it computed it over other KV, else computed from its tokens."""
        wplan = self.plan.replayed.get(writer)
        if wplan is None:
            tokens = self.plan.writers[writer]
            kv, ran = self.store.kv(self.model, tokens, count, self.chunk)
            self.forwarded += ran
            return kv
        if writer not in self.writer_kvs:
            inner = _Cache(self.model, wplan, self.store, self.chunk)
            _feed_as_written(inner)
            self.forwarded += inner.forwarded
            self.writer_kvs[writer] = inner.own_kv()
        return self.writer_kvs[writer]

    def own_kv(self) -> KV:
        """The cache, with the request's own KV back where a change overwrote it."""
        layers = hfcompat.layer_count(self.model)
        kv = [hfcompat.layer_kv(self.kv, layer) for layer in range(layers)]
        keys = [k.clone() for k, _ in kv]
        values = [v.clone() for _, v in kv]
        for p, (ks, vs) in self.kept.items():
            for layer in range(layers):
                keys[layer][:, :, p] = ks[layer]
                values[layer][:, :, p] = vs[layer]
        return keys, values

    def _at(self, p: int) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        layers = [
            hfcompat.layer_kv(self.kv, layer) for layer in range(hfcompat.layer_count(self.model))
        ]
        return [k[:, :, p].clone() for k, _ in layers], [v[:, :, p].clone() for _, v in layers]

    def crop(self, length: int) -> None:
        self.kv = hfcompat.truncated(self.kv, length, hfcompat.layer_count(self.model))
        del self.labels[length:]


def _feed_as_written(cache: _Cache) -> None:
    """Replay a writer's steps with the tokens it really fed (its kept output), so the cache
    holds the KV it wrote."""
    plan = cache.plan
    start = plan.computed[0] if plan.computed else len(plan.slots)
    cache.place(plan.slots[:start])
    if plan.computed:
        cache.feed(plan.computed_tokens(), start)
    fed = list(plan.delivered or [])[: max(0, plan.n_out - 1)]
    base = len(plan.slots)
    steps = sorted(plan.later, key=lambda s: s[0])
    q = base
    while q < base + len(fed):
        while steps and steps[0][0] <= q:
            cache.patch(steps.pop(0)[1])
        end = min(steps[0][0] if steps else base + len(fed), base + len(fed))
        cache.feed(fed[q - base : end - base], q)
        q = end


def decode_stepwise(
    model: Any,
    plan: SuspectPlan,
    first_token: int | None,
    store: WriterStore | None = None,
    chunk: int | None = None,
    expected: Sequence[int] | None = None,
    first_logits: torch.Tensor | None = None,
    temperature: float = 1.0,
) -> DecodeResult:
    """plan.n_out greedy tokens, each step attending the KV the ledger says it read.
    `first_token` (and `first_logits`, its distribution, for scoring) is used where the first
    step did not compute prompt positions on this node (plan.computed empty); otherwise that
    step gives it. The result carries the first decode step's attention share per writer and,
    with `expected`, the delivered tokens' scores (forensics.replay.evidence)."""
    attention.ensure(model)
    n_out = plan.n_out
    if n_out <= 0:
        return DecodeResult([])
    with torch.inference_mode():
        cache = _Cache(model, plan, store or WriterStore(), chunk)
        start = plan.computed[0] if plan.computed else len(plan.slots)
        cache.place(plan.slots[:start])
        if plan.computed:
            first_logits = cache.feed(plan.computed_tokens(), start)
            first = int(torch.argmax(first_logits).item())
        elif first_token is None:
            raise ValueError("first_token is needed when the first step computed nothing here")
        else:
            first = int(first_token)
        forced = expected is not None and len(expected) == n_out
        if forced and expected is not None:
            tokens, per_slot, labels, scores = _forced(cache, first, expected, temperature)
            if first_logits is not None:
                scores = score(first_logits, [int(expected[0])], temperature) + scores
        else:
            tokens, per_slot, labels = _decode(cache, first, n_out)
            scores = None
    result = DecodeResult(tokens, forwarded_tokens=cache.forwarded, scores=scores)
    if per_slot:  # the first decode step's attention per writer
        n = min(len(labels), len(per_slot))
        attribute_shares(result, labels[:n], per_slot[:n])
    return result


class _FirstStep:
    """The first decode step's attention per position and the slots it attended."""

    def __init__(self) -> None:
        self.per_slot: list[float] | None = None
        self.labels: list[Slot] = []

    def feed(self, cache: _Cache, fed: list[int], q: int) -> torch.Tensor:
        """cache.feed (every position's logits), capturing the attention on the first call."""
        if self.per_slot is not None:
            return cache.feed(fed, q, every_logit=True)
        self.labels = list(cache.labels)
        with attention.capture_shares(hfcompat.layer_count(cache.model)) as capture:
            logits = cache.feed(fed, q, every_logit=True)
        self.per_slot = capture.per_slot(q) or []
        return logits


def _patch_until(cache: _Cache, steps: list[tuple[int, list[tuple[int, Slot]]]], q: int) -> int:
    """Apply the changes read by the step that feeds position q; the next change's position."""
    while steps and steps[0][0] <= q:
        cache.patch(steps.pop(0)[1])
    return steps[0][0] if steps else 1 << 62


def _forced(
    cache: _Cache, first: int, expected: Sequence[int], temperature: float
) -> tuple[list[int], list[float] | None, list[Slot], TokenScores]:
    """Feed the delivered tokens, each stretch between two changes in one pass, patching the
    cache before the step that read the change; (greedy tokens up to the first that differs
    from the delivered ones, the first decode step's attention per position, the slots it
    attended, the scores of the delivered tokens after the first)."""
    base = len(cache.plan.slots)
    steps = sorted(cache.plan.later, key=lambda s: s[0])
    last = base + len(expected) - 1  # positions base..last-1 are fed
    seen = _FirstStep()
    scores = TokenScores()
    q = base
    while q < last or seen.per_slot is None:
        end = max(q + 1, min(_patch_until(cache, steps, q), last))
        logits = seen.feed(cache, [int(t) for t in expected[q - base : end - base]], q)
        if q >= last:  # n_out == 1: the step ran for its attention only
            break
        targets = [int(t) for t in expected[q - base + 1 : end - base + 1]]
        scores = scores + score(logits, targets, temperature)
        q = end
    tokens = [first]
    if first == int(expected[0]):
        for i, token in enumerate(scores.greedy, start=1):
            tokens.append(token)
            if token != int(expected[i]):
                break
    return tokens, seen.per_slot, seen.labels, scores


def _decode(
    cache: _Cache, first: int, n_out: int
) -> tuple[list[int], list[float] | None, list[Slot]]:
    """Greedy decoding from the cache, one step at a time; (tokens, the first decode step's
    attention per position, and the slots it attended)."""
    base = len(cache.plan.slots)
    steps = sorted(cache.plan.later, key=lambda s: s[0])
    tokens = [first]
    seen = _FirstStep()
    last = base + n_out - 1  # positions base..last-1 are fed
    q = base
    while q < last or seen.per_slot is None:
        _patch_until(cache, steps, q)
        logits = seen.feed(cache, [tokens[-1]], q)
        if q >= last:  # n_out == 1: the step ran for its attention only
            break
        tokens.append(int(torch.argmax(logits[-1]).item()))
        q += 1
    return tokens[:n_out], seen.per_slot, seen.labels
