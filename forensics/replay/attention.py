"""Replay's attention: the model's fast kernels, and the first decode step's attention per slot.

Two attention implementations are registered with transformers under their own names, so that
any causal LM whose layers go through transformers' attention interface can use them:

- `kvforensics` (FAST): flash-attention where it is installed (CUDA, 16-bit models), else
  PyTorch's scaled-dot-product attention. No mask is ever built: a replay runs one unpadded
  sequence, so a chunk of queries is causal against the keys with lower-right alignment (the
  chunk's queries are the last positions of the keys) and a single decode query sees every key.
- `kvforensics-eager` (EAGER): the textbook computation (scores, float32 softmax, weighted sum),
  kept to check the fast kernels against.

While `capture_shares` is active, the first decode step's query (alone, or the first of several
tokens fed at once) also has, per layer, its softmax over the keys it sees computed directly
(scores in float32, in blocks of keys), and the mean over heads goes to the capture. That is
the evidence of which writers' KV the step attended to, without switching the model to eager
attention or materialising any other attention matrix."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from importlib.util import find_spec
from typing import Any

import torch
import torch.nn.functional as F

FAST = "kvforensics"
EAGER = "kvforensics-eager"
SHARE_BLOCK = 1 << 16  # keys per block when computing a decode query's scores


class ShareCapture:
    """Sum over layers of the decode query's attention per key (mean over heads); only the
    first forward pass inside the capture counts (each layer is seen once)."""

    def __init__(self, layers: int) -> None:
        self.total: torch.Tensor | None = None
        self.layers = 0
        self.expected = layers

    def add(self, weights: torch.Tensor) -> None:
        """weights: [heads, keys] float32 softmax of one layer."""
        if self.layers >= self.expected:
            return
        mean = weights.mean(dim=0)
        if self.total is None:
            self.total = mean
        else:
            self.total = self.total + mean.to(self.total.device)
        self.layers += 1

    def per_slot(self, length: int) -> list[float] | None:
        """Mean over layers of the attention on keys 0..length-1 (None when nothing was seen)."""
        if self.total is None or self.layers == 0:
            return None
        return [float(x) for x in (self.total[:length] / self.layers).cpu().tolist()]


_active: list[ShareCapture] = []


@contextmanager
def capture_shares(layers: int) -> Iterator[ShareCapture]:
    """Within the block, the first query of each of the next `layers` attention calls adds its
    weights to the capture."""
    capture = ShareCapture(layers)
    _active.append(capture)
    try:
        yield capture
    finally:
        _active.remove(capture)


def register() -> None:
    """Make FAST and EAGER known to transformers (idempotent)."""
    _register_once()


@cache
def _register_once() -> None:
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface

    AttentionInterface.register(FAST, fast_attention)
    AttentionInterface.register(EAGER, eager_attention)
    AttentionMaskInterface.register(FAST, _no_mask)
    AttentionMaskInterface.register(EAGER, _no_mask)


def use(model: Any, kind: str = FAST) -> Any:
    """Switch `model` to one of the two implementations (FAST or EAGER); returns the model."""
    register()
    if getattr(model.config, "_attn_implementation", None) == kind:
        return model
    if hasattr(model, "set_attn_implementation"):
        model.set_attn_implementation(kind)
    else:
        model.config._attn_implementation = kind
    return model


def _no_mask(*_args: Any, **_kwargs: Any) -> None:
    """Replays run one unpadded sequence: causality is the kernels' own (lower-right)."""
    return None


def fast_attention(
    # transformers' attention interface: every argument is passed by keyword
    module: Any,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,  # noqa: ARG001
    scaling: float | None = None,
    dropout: float = 0.0,  # noqa: ARG001
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """query [1, heads, q, d]; key, value [1, kv_heads, k, d] -> ([1, q, heads, d], None)."""
    _no_window(kwargs.get("sliding_window"), key.shape[2])
    scale = _scale(query, scaling)
    softcap = kwargs.get("softcap")
    if softcap:
        return eager_attention(module, query, key, value, None, scale, **kwargs)
    _capture(query, key, scale, None)
    if _flash_usable(query):
        from flash_attn import flash_attn_func  # type: ignore[import-not-found]

        out = flash_attn_func(
            query.transpose(1, 2),
            key.transpose(1, 2),
            value.transpose(1, 2),
            softmax_scale=scale,
            causal=query.shape[2] > 1,
        )
        return out, None
    return _sdpa(query, key, value, scale).transpose(1, 2).contiguous(), None


def eager_attention(
    # transformers' attention interface: every argument is passed by keyword
    module: Any,  # noqa: ARG001
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,  # noqa: ARG001
    scaling: float | None = None,
    dropout: float = 0.0,  # noqa: ARG001
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """The same result as fast_attention, computed step by step with an explicit causal mask."""
    _no_window(kwargs.get("sliding_window"), key.shape[2])
    scale = _scale(query, scaling)
    _capture(query, key, scale, kwargs.get("softcap"))
    groups = query.shape[1] // key.shape[1]
    k = key.repeat_interleave(groups, dim=1)
    v = value.repeat_interleave(groups, dim=1)
    scores = torch.matmul(query, k.transpose(2, 3)) * scale
    softcap = kwargs.get("softcap")
    if softcap:
        scores = softcap * torch.tanh(scores / softcap)
    q_len, k_len = query.shape[2], key.shape[2]
    allowed = torch.ones(q_len, k_len, dtype=torch.bool, device=query.device)
    allowed = allowed.tril(k_len - q_len)
    scores = scores.masked_fill(~allowed, float("-inf"))
    weights = F.softmax(scores, dim=-1, dtype=torch.float32).to(query.dtype)
    return torch.matmul(weights, v).transpose(1, 2).contiguous(), None


def _no_window(window: int | None, keys: int) -> None:
    if window is not None and 0 < int(window) < keys:
        from forensics.errors import ReplayError

        raise ReplayError(
            f"the model uses sliding-window attention ({window} tokens), which "
            "replay does not rebuild; use a full-attention model"
        )


def _scale(query: torch.Tensor, scaling: float | None) -> float:
    return float(scaling) if scaling is not None else query.shape[-1] ** -0.5


def _sdpa(
    query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, scale: float
) -> torch.Tensor:
    """PyTorch SDPA without a materialised mask where the backend allows it."""
    heads, kv_heads = query.shape[1], key.shape[1]
    q_len, k_len = query.shape[2], key.shape[2]
    groups = heads // kv_heads
    if q_len == 1:
        # One decode query: no mask; the query heads of a KV head ride in the query length.
        packed = query.reshape(1, kv_heads, groups, query.shape[-1])
        out = F.scaled_dot_product_attention(packed, key, value, scale=scale)
        return out.reshape(1, heads, 1, query.shape[-1])
    if groups > 1:
        key = key.repeat_interleave(groups, dim=1)
        value = value.repeat_interleave(groups, dim=1)
    if q_len == k_len:
        return F.scaled_dot_product_attention(query, key, value, is_causal=True, scale=scale)
    from torch.nn.attention.bias import causal_lower_right

    return F.scaled_dot_product_attention(
        query, key, value, attn_mask=causal_lower_right(q_len, k_len), scale=scale
    )


def _capture(query: torch.Tensor, key: torch.Tensor, scale: float, softcap: float | None) -> None:
    """The first query of the call (a decode step, or the first of several fed at once) and
    the keys it sees (lower-right causal: all but the later queries' own)."""
    if _active:
        seen = key.shape[2] - query.shape[2] + 1
        _active[-1].add(decode_weights(query[:, :, :1], key[:, :, :seen], scale, softcap))


def decode_weights(
    query: torch.Tensor, key: torch.Tensor, scale: float, softcap: float | None = None
) -> torch.Tensor:
    """Softmax of one query [1, heads, 1, d] over keys [1, kv_heads, n, d]: [heads, n] float32,
    computed in blocks of keys (query head h reads KV head h // (heads // kv_heads))."""
    heads, kv_heads, n, dim = query.shape[1], key.shape[1], key.shape[2], key.shape[3]
    q = query[0, :, -1, :].float().reshape(kv_heads, heads // kv_heads, dim)
    scores = torch.empty(kv_heads, heads // kv_heads, n, dtype=torch.float32, device=query.device)
    for lo in range(0, n, SHARE_BLOCK):
        block = key[0, :, lo : lo + SHARE_BLOCK, :].float()
        scores[:, :, lo : lo + block.shape[1]] = torch.matmul(q, block.transpose(1, 2))
    scores.mul_(scale)
    if softcap:
        scores = softcap * torch.tanh(scores / softcap)
    return torch.softmax(scores, dim=-1).reshape(heads, n)


def _flash_usable(query: torch.Tensor) -> bool:
    return query.is_cuda and query.dtype in (torch.float16, torch.bfloat16) and _has_flash()


@cache
def _has_flash() -> bool:
    return find_spec("flash_attn") is not None


def kernel_name(device: str, dtype: torch.dtype) -> str:
    """The kernel FAST uses on this device and dtype, in words."""
    if device.startswith("cuda") and dtype in (torch.float16, torch.bfloat16) and _has_flash():
        return "flash-attention"
    return "sdpa"


def ensure(model: Any) -> None:
    """Use FAST unless the model already runs one of the two implementations."""
    if getattr(model.config, "_attn_implementation", None) not in (FAST, EAGER):
        use(model, FAST)
