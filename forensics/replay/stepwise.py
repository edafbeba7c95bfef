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

With the delivered tokens known, the steps between two changes are checked against them in one
forward pass (exactly greedy decoding while they agree), as forensics.replay.decode does."""

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
) -> DecodeResult:
    """plan.n_out greedy tokens, each step attending the KV the ledger says it read.
    `first_token` is used where the first step did not compute prompt positions on this node
    (plan.computed empty); otherwise that step gives it. The result carries the first decode
    step's attention share per writer."""
    attention.ensure(model)
    n_out = plan.n_out
    if n_out <= 0:
        return DecodeResult([])
    with torch.inference_mode():
        cache = _Cache(model, plan, store or WriterStore(), chunk)
        start = plan.computed[0] if plan.computed else len(plan.slots)
        cache.place(plan.slots[:start])
        if plan.computed:
            first = int(torch.argmax(cache.feed(plan.computed_tokens(), start)).item())
        elif first_token is None:
            raise ValueError("first_token is needed when the first step computed nothing here")
        else:
            first = int(first_token)
        tokens, per_slot, labels = _decode(cache, first, n_out, expected)
    result = DecodeResult(tokens, forwarded_tokens=cache.forwarded)
    if per_slot:  # the first decode step's attention per writer
        n = min(len(labels), len(per_slot))
        attribute_shares(result, labels[:n], per_slot[:n])
    return result


def _decode(
    cache: _Cache, first: int, n_out: int, expected: Sequence[int] | None
) -> tuple[list[int], list[float] | None, list[Slot]]:
    """Decode from the cache; (tokens, the first decode step's attention per position, and the
    slots it attended)."""
    plan = cache.plan
    base = len(plan.slots)
    steps = sorted(plan.later, key=lambda s: s[0])
    tokens = [first]
    matching = expected is not None and len(expected) == n_out and int(expected[0]) == first
    per_slot: list[float] | None = None
    labels: list[Slot] = []
    last = base + n_out - 1  # positions base..last-1 are fed
    q = base
    while q < last or per_slot is None:
        while steps and steps[0][0] <= q:
            cache.patch(steps.pop(0)[1])
        end = min(steps[0][0] if steps else last, last)
        fed = [tokens[-1]]
        if matching and expected is not None:
            fed += [int(t) for t in expected[len(tokens) : len(tokens) + end - q - 1]]
        if per_slot is None:
            labels = list(cache.labels)
            with attention.capture_shares(hfcompat.layer_count(cache.model)) as capture:
                logits = cache.feed(fed, q, every_logit=True)
            per_slot = capture.per_slot(q) or []
        else:
            logits = cache.feed(fed, q, every_logit=True)
        if q >= last:  # n_out == 1: the step ran for its attention only
            break
        chosen = [int(t) for t in torch.argmax(logits, dim=-1).tolist()]
        for i, token in enumerate(chosen):
            tokens.append(token)
            if matching and expected is not None and token != int(expected[len(tokens) - 1]):
                matching = False
                cache.crop(q + i + 1)
                q += i + 1
                break
        else:
            q += len(fed)
    return tokens[:n_out], per_slot, labels
