"""Greedy decoding from a rebuilt KV cache: what a request's decode really attended over.

`writers` maps a request id to the token ids whose KV that request wrote (what it processed:
prompt + generated, or a 1-token stub + generated). `slots[i]` names the (writer request id,
writer position) whose KV sits at the reader's position i, or None for memory never written
(zeros). Each writer's tokens are run through the model once, in chunks, with the model's fast
attention in its own dtype, and per layer the post-rope keys and values at the needed positions
are placed at the reader's positions: keys keep the rotation of the writer's position, as they
did in the engine's memory. Then the reader decodes greedily: `first_token` (the prefill's
output) is fed at position len(slots), and every generated token at the next position, attending
over all slots. The first decode step's attention per slot is computed directly from its query
and the rebuilt keys (see forensics.replay.attention)."""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from forensics.errors import ReplayError
from forensics.replay import attention, hfcompat
from forensics.replay.evidence import TokenScores, score

Slot = tuple[str, int] | None
KV = tuple[list[torch.Tensor], list[torch.Tensor]]

CHUNK_TOKENS = 512  # tokens per forward pass when the caller planned none


@dataclass
class DecodeResult:
    """The decoded tokens and the evidence of the first decode step."""

    tokens: list[int]
    writer_share: dict[str, float] = field(default_factory=dict)  # attention on each writer
    uninitialised_share: float = 0.0  # attention on never-written (zero) slots
    forwarded_tokens: int = 0  # token positions run through the model
    # with the delivered tokens known: each one's score under this replay (teacher-forced)
    scores: TokenScores | None = None
    first_logits: torch.Tensor | None = None  # the prefill's last logits (clean replay)


def token_digest(tokens: Sequence[int]) -> str:
    """Identity of a token sequence: equal sequences give equal KV (the model is deterministic)."""
    return hashlib.sha256(np.asarray(tokens, dtype=np.int64).tobytes()).hexdigest()


class WriterStore:
    """Writers' KV computed once per run: a writer that later suspects read again is kept (on
    the model's devices) until its last use, while it fits in `keep_bytes`.

    `uses` and `lengths` (by token_digest) come from planning the whole run: how many rebuilds
    will ask for the writer, and the most positions any of them needs."""

    def __init__(
        self,
        uses: Mapping[str, int] | None = None,
        lengths: Mapping[str, int] | None = None,
        keep_bytes: int = 0,
    ):
        self.uses = dict(uses or {})
        self.lengths = dict(lengths or {})
        self.keep_bytes = keep_bytes
        self.kept: dict[str, tuple[int, KV]] = {}
        self.reused = 0  # rebuilds served from kept KV

    def kv(
        self, model: Any, tokens: Sequence[int], count: int, chunk: int | None
    ) -> tuple[KV, int]:
        """KV of tokens[:n] for some n >= count, and the positions run through the model."""
        key = token_digest(tokens)
        remaining = self.uses.get(key, 1) - 1
        self.uses[key] = remaining
        held = self.kept.get(key)
        if held is not None and held[0] >= count:
            if remaining <= 0:
                del self.kept[key]
            self.reused += 1
            return held[1], 0
        length = min(len(tokens), max(count, self.lengths.get(key, count)))
        _, keys, values = run_tokens(model, tokens, length, chunk)
        if remaining > 0 and self._room() >= _nbytes(keys, values):
            self.kept[key] = (length, (keys, values))
        return (keys, values), length

    def kept_bytes(self) -> int:
        return sum(_nbytes(*kv) for _, kv in self.kept.values())

    def release(self) -> None:
        """Drop every kept writer (memory is needed for a suspect)."""
        self.kept.clear()

    def _room(self) -> int:
        return self.keep_bytes - self.kept_bytes()


def _nbytes(keys: list[torch.Tensor], values: list[torch.Tensor]) -> int:
    return sum(t.numel() * t.element_size() for t in (*keys, *values))


def prefill_first_token(model: Any, token_ids: Sequence[int], chunk: int | None = None) -> int:
    """The token a prefill of `token_ids` (positions 0..n-1) produces: argmax of the last logits."""
    return int(torch.argmax(prefill_logits(model, token_ids, chunk)).item())


def prefill_logits(model: Any, token_ids: Sequence[int], chunk: int | None = None) -> torch.Tensor:
    """The last logits of a prefill of `token_ids` (the first output token's distribution)."""
    if not token_ids:
        raise ReplayError("cannot prefill an empty token sequence")
    logits, _, _ = run_tokens(model, token_ids, len(token_ids), chunk)
    return logits


def greedy_decode(
    model: Any,
    writers: Mapping[str, Sequence[int]],
    slots: Sequence[Slot],
    first_token: int,
    n_out: int,
) -> list[int]:
    """n_out tokens: first_token, then greedy tokens from positions len(slots), len(slots)+1, …"""
    return decode_with_evidence(model, writers, slots, first_token, n_out).tokens


def decode_with_evidence(
    model: Any,
    writers: Mapping[str, Sequence[int]],
    slots: Sequence[Slot],
    first_token: int,
    n_out: int,
    store: WriterStore | None = None,
    chunk: int | None = None,
    expected: Sequence[int] | None = None,
    first_logits: torch.Tensor | None = None,
    temperature: float = 1.0,
) -> DecodeResult:
    """greedy_decode, also returning the attention share of the first decode step per writer.
    With `expected` (the delivered output), the delivered tokens are fed in one forward pass
    (teacher-forced) and scored (the first one from `first_logits`, the distribution it was
    drawn from); the greedy tokens are kept up to the first that differs from them."""
    if n_out <= 0:
        return DecodeResult([])
    with torch.inference_mode():
        keys, values, forwarded = rebuild_kv(model, writers, slots, store, chunk)
        result, per_slot = _decode(
            model, (keys, values), len(slots), first_token, n_out, expected, True, temperature
        )
    result.forwarded_tokens += forwarded
    if result.scores is not None and first_logits is not None and expected is not None:
        result.scores = score(first_logits, [int(expected[0])], temperature) + result.scores
    attribute_shares(result, slots, per_slot)
    return result


def decode_own(
    model: Any,
    prompt: Sequence[int],
    n_out: int,
    chunk: int | None = None,
    expected: Sequence[int] | None = None,
    temperature: float = 1.0,
) -> tuple[int, DecodeResult]:
    """The clean replay: one prefill of `prompt` gives both its first token and the KV the
    decode attends over. With `expected`, the delivered tokens are fed and scored (teacher-
    forced) and the greedy tokens are kept up to the first that differs from them (enough to
    know it does not reproduce it). Returns (first token, result)."""
    if not prompt:
        raise ReplayError("cannot prefill an empty token sequence")
    with torch.inference_mode():
        logits, keys, values = run_tokens(model, prompt, len(prompt), chunk)
        first = int(torch.argmax(logits).item())
        if n_out <= 0:
            return first, DecodeResult([], forwarded_tokens=len(prompt), first_logits=logits)
        result, _ = _decode(
            model, (keys, values), len(prompt), first, n_out, expected, False, temperature
        )
    result.forwarded_tokens += len(prompt)
    result.first_logits = logits
    if result.scores is not None and expected is not None:
        result.scores = score(logits, [int(expected[0])], temperature) + result.scores
    return first, result


def rebuild_kv(
    model: Any,
    writers: Mapping[str, Sequence[int]],
    slots: Sequence[Slot],
    store: WriterStore | None = None,
    chunk: int | None = None,
) -> tuple[list[torch.Tensor], list[torch.Tensor], int]:
    """Per layer, keys and values [1, kv_heads, len(slots), head_dim] as the reader held them."""
    needed = _needed_positions(writers, slots)
    store = store or WriterStore()
    keys: list[torch.Tensor] = []
    values: list[torch.Tensor] = []
    forwarded = 0
    for writer in sorted(needed):
        reader_idx, writer_pos = needed[writer]
        kv, ran = store.kv(model, writers[writer], max(writer_pos) + 1, chunk)
        forwarded += ran
        _place(kv, keys, values, len(slots), reader_idx, writer_pos)
        del kv
    if not keys:
        keys, values = zero_kv(model, len(slots))
    return keys, values, forwarded


def _needed_positions(
    writers: Mapping[str, Sequence[int]], slots: Sequence[Slot]
) -> dict[str, tuple[list[int], list[int]]]:
    """writer -> (reader indices, writer positions), checked against the writer's tokens."""
    needed: dict[str, tuple[list[int], list[int]]] = defaultdict(lambda: ([], []))
    for i, slot in enumerate(slots):
        if slot is None:
            continue
        writer, pos = slot
        if writer not in writers:
            raise ReplayError(f"no tokens for writer {writer} (needed at position {i})")
        if not 0 <= pos < len(writers[writer]):
            raise ReplayError(
                f"writer {writer} has {len(writers[writer])} tokens; its position {pos} is needed"
            )
        needed[writer][0].append(i)
        needed[writer][1].append(pos)
    return dict(needed)


def _place(
    kv: KV,
    keys: list[torch.Tensor],
    values: list[torch.Tensor],
    length: int,
    reader_idx: list[int],
    writer_pos: list[int],
) -> None:
    src_keys, src_values = kv
    for layer, (k, v) in enumerate(zip(src_keys, src_values, strict=True)):
        if len(keys) <= layer:
            keys.append(k.new_zeros((*k.shape[:2], length, k.shape[3])))
            values.append(v.new_zeros((*v.shape[:2], length, v.shape[3])))
        src = torch.tensor(writer_pos, device=k.device)
        dst = torch.tensor(reader_idx, device=k.device)
        keys[layer].index_copy_(2, dst, k.index_select(2, src))
        values[layer].index_copy_(2, dst, v.index_select(2, src))


def zero_kv(model: Any, length: int) -> KV:
    """All-zero KV for a reader none of whose slots were ever written: run one token for shapes."""
    _, ks, vs = run_tokens(model, [0], 1, 1)
    return (
        [k.new_zeros((*k.shape[:2], length, k.shape[3])) for k in ks],
        [v.new_zeros((*v.shape[:2], length, v.shape[3])) for v in vs],
    )


def run_tokens(
    model: Any, token_ids: Sequence[int], count: int, chunk: int | None = None
) -> tuple[torch.Tensor, list[torch.Tensor], list[torch.Tensor]]:
    """Run token_ids[:count] at positions 0..count-1, `chunk` tokens per forward pass;
    (last logits, per-layer keys, per-layer values)."""
    attention.ensure(model)
    device = input_device(model)
    ids = torch.tensor(list(token_ids[:count]), dtype=torch.long, device=device)
    kv = hfcompat.new_cache()
    logits = torch.empty(0)
    step = max(1, int(chunk or CHUNK_TOKENS))
    with torch.inference_mode():
        for start in range(0, count, step):
            piece = ids[start : start + step].unsqueeze(0)
            positions = torch.arange(start, start + piece.shape[1], device=device).unsqueeze(0)
            out = hfcompat.forward(model, piece, positions, kv)
            logits = out.logits[0, -1].float()
            del out
    layers = [hfcompat.layer_kv(kv, layer) for layer in range(hfcompat.layer_count(model))]
    return logits, [k for k, _ in layers], [v for _, v in layers]


def _decode(
    model: Any,
    kv_tensors: KV,
    start: int,
    first_token: int,
    n_out: int,
    expected: Sequence[int] | None,
    shares: bool,
    temperature: float = 1.0,
) -> tuple[DecodeResult, list[float] | None]:
    """Greedy tokens from the KV (first_token at position `start`), and with `shares` the first
    step's attention per slot, averaged over layers and heads.

    With `expected` (n_out delivered tokens), expected[0] … expected[n_out-2] are fed in one
    forward pass (teacher-forced): every delivered token after the first is scored (`scores`,
    without the first, whose distribution is the prefill's), and the greedy choice at every
    position is known. While they all equal `expected`, that is exactly the step-by-step greedy
    output; the tokens are kept up to the first that differs."""
    attention.ensure(model)
    kv = hfcompat.new_cache()
    for layer, (k, v) in enumerate(zip(*kv_tensors, strict=True)):
        kv.update(k, v, layer)
    if expected is None or len(expected) != n_out or n_out < 2:
        result, per_slot = _step_by_step(model, kv, start, [int(first_token)], n_out, shares)
        if expected is not None and len(expected) == n_out:
            result.scores = TokenScores()  # n_out == 1: only the first token, scored by caller
        return result, per_slot
    fed = [int(t) for t in expected[: n_out - 1]]
    ids = torch.tensor([fed], dtype=torch.long, device=input_device(model))
    positions = torch.arange(start, start + len(fed), device=ids.device).unsqueeze(0)
    with attention.capture_shares(hfcompat.layer_count(model) if shares else 0) as capture:
        out = hfcompat.forward(model, ids, positions, kv, every_logit=True)
    per_slot = capture.per_slot(start) if shares else None
    scores = score(out.logits[0], [int(t) for t in expected[1:n_out]], temperature)
    del out
    tokens = [int(first_token)]
    if tokens[0] == int(expected[0]):
        for i in range(1, n_out):
            tokens.append(scores.greedy[i - 1])
            if scores.greedy[i - 1] != int(expected[i]):
                break
    return DecodeResult(tokens, forwarded_tokens=len(fed), scores=scores), per_slot


def _step_by_step(
    model: Any, kv: Any, start: int, tokens: list[int], n_out: int, shares: bool, offset: int = 0
) -> tuple[DecodeResult, list[float] | None]:
    """Feed tokens[-1] at `start`, append the greedy choice, until n_out - 1 more steps (one
    step at least, for the shares)."""
    device = input_device(model)
    result = DecodeResult(tokens)
    per_slot: list[float] | None = None
    target = offset + n_out
    for step in range(max(n_out - 1, 1)):
        ids = torch.tensor([[tokens[-1]]], dtype=torch.long, device=device)
        positions = torch.tensor([[start + step]], dtype=torch.long, device=device)
        if step == 0 and shares:
            with attention.capture_shares(hfcompat.layer_count(model)) as capture:
                out = hfcompat.forward(model, ids, positions, kv)
            per_slot = capture.per_slot(start)
        else:
            out = hfcompat.forward(model, ids, positions, kv)
        result.forwarded_tokens += 1
        if len(tokens) < target:
            tokens.append(int(torch.argmax(out.logits[0, -1]).item()))
    return result, per_slot


def attribute_shares(
    result: DecodeResult, slots: Sequence[Slot], per_slot: list[float] | None
) -> None:
    """Sum the first step's attention per writer (and over never-written slots)."""
    if per_slot is None:
        return
    shares: dict[str, float] = defaultdict(float)
    uninitialised = 0.0
    for slot, weight in zip(slots, per_slot, strict=True):
        if slot is None:
            uninitialised += weight
        else:
            shares[slot[0]] += weight
    result.writer_share = {w: round(s, 9) for w, s in sorted(shares.items())}
    result.uninitialised_share = round(uninitialised, 9)


def input_device(model: Any) -> torch.device:
    """Where input ids go: the input embeddings' device (the first of a multi-GPU map)."""
    embeddings = model.get_input_embeddings() if hasattr(model, "get_input_embeddings") else None
    if embeddings is not None and hasattr(embeddings, "weight"):
        return embeddings.weight.device
    return next(model.parameters()).device
