"""Greedy decoding from a rebuilt KV cache: what a request's decode really attended over.

`writers` maps a request id to the token ids whose KV that request wrote (what it processed:
prompt + generated, or a 1-token stub + generated). `slots[i]` names the (writer request id,
writer position) whose KV sits at the reader's position i, or None for memory never written
(zeros). Each writer's tokens are run through the model once, in chunks, and per layer the
post-rope keys and values at the needed positions are placed at the reader's positions: keys keep
the rotation of the writer's position, as they did in the engine's memory. Then the reader decodes
greedily: `first_token` (the prefill's output) is fed at position len(slots), and every generated
token at the next position, attending over all slots."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from forensics.errors import ReplayError
from forensics.replay import hfcompat

Slot = tuple[str, int] | None

CHUNK_TOKENS = 512            # tokens per forward pass at most
ATTENTION_BUDGET = 1 << 26    # attention-score elements per forward pass at most (eager attention)


@dataclass
class DecodeResult:
    """The decoded tokens and the evidence of the first decode step."""

    tokens: list[int]
    writer_share: dict[str, float] = field(default_factory=dict)  # attention on each writer
    unwritten_share: float = 0.0     # attention on never-written (zero) slots
    forwarded_tokens: int = 0        # token positions run through the model


def prefill_first_token(model: Any, token_ids: Sequence[int]) -> int:
    """The token a prefill of `token_ids` (positions 0..n-1) produces: argmax of the last logits."""
    if not token_ids:
        raise ReplayError("cannot prefill an empty token sequence")
    logits, _ = _run_tokens(model, token_ids, len(token_ids))
    return int(torch.argmax(logits).item())


def greedy_decode(model: Any, writers: Mapping[str, Sequence[int]], slots: Sequence[Slot],
                  first_token: int, n_out: int) -> list[int]:
    """n_out tokens: first_token, then greedy tokens from positions len(slots), len(slots)+1, …"""
    return decode_with_evidence(model, writers, slots, first_token, n_out).tokens


def decode_with_evidence(model: Any, writers: Mapping[str, Sequence[int]],
                         slots: Sequence[Slot], first_token: int, n_out: int) -> DecodeResult:
    """greedy_decode, also returning the attention share of the first decode step per writer."""
    if n_out <= 0:
        return DecodeResult([])
    with torch.inference_mode():
        keys, values, forwarded = rebuild_kv(model, writers, slots)
        kv = hfcompat.new_cache()
        for layer, (k, v) in enumerate(zip(keys, values, strict=True)):
            kv.update(k, v, layer)
        del keys, values
        result, per_slot = _decode_loop(model, kv, len(slots), first_token, n_out)
    result.forwarded_tokens += forwarded
    _attribute_shares(result, slots, per_slot)
    return result


def rebuild_kv(model: Any, writers: Mapping[str, Sequence[int]], slots: Sequence[Slot]
               ) -> tuple[list[torch.Tensor], list[torch.Tensor], int]:
    """Per layer, keys and values [1, kv_heads, len(slots), head_dim] as the reader held them."""
    needed = _needed_positions(writers, slots)
    keys: list[torch.Tensor] = []
    values: list[torch.Tensor] = []
    forwarded = 0
    for writer in sorted(needed):
        reader_idx, writer_pos = needed[writer]
        count = max(writer_pos) + 1
        _, kv = _run_tokens(model, writers[writer], count)
        forwarded += count
        _place(kv, keys, values, len(slots), reader_idx, writer_pos, hfcompat.layer_count(model))
        del kv
    if not keys:
        keys, values = _zeros(model, len(slots))
    return keys, values, forwarded


def _needed_positions(writers: Mapping[str, Sequence[int]], slots: Sequence[Slot]
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
            raise ReplayError(f"writer {writer} has {len(writers[writer])} tokens; its position "
                              f"{pos} is needed")
        needed[writer][0].append(i)
        needed[writer][1].append(pos)
    return dict(needed)


def _place(kv: Any, keys: list[torch.Tensor], values: list[torch.Tensor], length: int,
           reader_idx: list[int], writer_pos: list[int], layers: int) -> None:
    for layer in range(layers):
        k, v = hfcompat.layer_kv(kv, layer)
        if len(keys) <= layer:
            keys.append(k.new_zeros((*k.shape[:2], length, k.shape[3])))
            values.append(v.new_zeros((*v.shape[:2], length, v.shape[3])))
        src = torch.tensor(writer_pos, device=k.device)
        dst = torch.tensor(reader_idx, device=k.device)
        keys[layer].index_copy_(2, dst, k.index_select(2, src))
        values[layer].index_copy_(2, dst, v.index_select(2, src))


def _zeros(model: Any, length: int) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """All-zero KV for a reader none of whose slots were ever written: run one token for shapes."""
    _, kv = _run_tokens(model, [0], 1)
    keys, values = [], []
    for layer in range(hfcompat.layer_count(model)):
        k, v = hfcompat.layer_kv(kv, layer)
        keys.append(k.new_zeros((*k.shape[:2], length, k.shape[3])))
        values.append(v.new_zeros((*v.shape[:2], length, v.shape[3])))
    return keys, values


def _run_tokens(model: Any, token_ids: Sequence[int], count: int) -> tuple[torch.Tensor, Any]:
    """Run token_ids[:count] at positions 0..count-1 in chunks; (last logits, the cache)."""
    device = _device(model)
    ids = torch.tensor(list(token_ids[:count]), dtype=torch.long, device=device)
    kv = hfcompat.new_cache()
    logits = torch.empty(0)
    chunk = chunk_tokens(model, count)
    with torch.inference_mode():
        for start in range(0, count, chunk):
            piece = ids[start:start + chunk].unsqueeze(0)
            positions = torch.arange(start, start + piece.shape[1], device=device).unsqueeze(0)
            out = hfcompat.forward(model, piece, positions, kv)
            logits = out.logits[0, -1].float()
    return logits, kv


def chunk_tokens(model: Any, context: int) -> int:
    """Tokens per forward pass so that one pass's attention scores stay within the budget."""
    heads = int(getattr(model.config, "num_attention_heads", 1) or 1)
    fit = ATTENTION_BUDGET // max(1, heads * max(context, 1))
    return max(1, min(CHUNK_TOKENS, fit))


def _decode_loop(model: Any, kv: Any, start: int, first_token: int, n_out: int
                 ) -> tuple[DecodeResult, list[float] | None]:
    """Decode; also the first step's attention per slot, averaged over layers and heads."""
    device = _device(model)
    tokens = [int(first_token)]
    result = DecodeResult(tokens)
    per_slot: list[float] | None = None
    for step in range(max(n_out - 1, 1)):
        ids = torch.tensor([[tokens[-1]]], dtype=torch.long, device=device)
        positions = torch.tensor([[start + step]], dtype=torch.long, device=device)
        out = hfcompat.forward(model, ids, positions, kv, attentions=step == 0)
        result.forwarded_tokens += 1
        if step == 0:
            per_slot = _slot_attention(out.attentions, start)
        if len(tokens) < n_out:
            tokens.append(int(torch.argmax(out.logits[0, -1]).item()))
    return result, per_slot


def _slot_attention(attentions: Any, length: int) -> list[float] | None:
    if not attentions or attentions[0] is None:
        return None
    stacked = torch.stack([a[0, :, -1, :length].float() for a in attentions])
    return [float(x) for x in stacked.mean(dim=(0, 1)).cpu().tolist()]


def _attribute_shares(result: DecodeResult, slots: Sequence[Slot],
                      per_slot: list[float] | None) -> None:
    """Sum the first step's attention per writer (and over never-written slots)."""
    if per_slot is None:
        return
    shares: dict[str, float] = defaultdict(float)
    unwritten = 0.0
    for slot, weight in zip(slots, per_slot, strict=True):
        if slot is None:
            unwritten += weight
        else:
            shares[slot[0]] += weight
    result.writer_share = {w: round(s, 9) for w, s in sorted(shares.items())}
    result.unwritten_share = round(unwritten, 9)


def _device(model: Any) -> torch.device:
    return next(model.parameters()).device
