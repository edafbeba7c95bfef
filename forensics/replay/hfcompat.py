"""The few transformers cache details that changed between releases, in one place.

transformers 4.x passes the cache as `past_key_values` and keeps `key_cache`/`value_cache` lists;
5.x calls it `cache` and keeps one layer object per decoder layer with `.keys`/`.values`."""

from __future__ import annotations

import inspect
from functools import cache
from typing import Any

import torch


@cache
def _cache_kwarg(forward: Any) -> str:
    """transformers 5 names the argument `cache`, 4.x `past_key_values`."""
    params = inspect.signature(forward).parameters
    return "cache" if "cache" in params else "past_key_values"


def new_cache() -> Any:
    """An empty dynamic KV cache (full attention layers, grown by `update`)."""
    from transformers import DynamicCache

    return DynamicCache()


def forward(
    model: Any, ids: torch.Tensor, positions: torch.Tensor, kv: Any, every_logit: bool = False
) -> Any:
    """One forward pass of `ids` at `positions` (both [1, n]) that extends the cache `kv`;
    logits only for the last position where the model allows it (unless every_logit)."""
    kwargs: dict[str, Any] = {_cache_kwarg(type(model).forward): kv}
    if not every_logit:
        kwargs.update(_last_logits(type(model).forward))
    return model(input_ids=ids, position_ids=positions, use_cache=True, **kwargs)


@cache
def _last_logits(forward: Any) -> dict[str, int]:
    """transformers computes the logits of every position unless told `logits_to_keep` (4.50+;
    `num_logits_to_keep` before)."""
    params = inspect.signature(forward).parameters
    for name in ("logits_to_keep", "num_logits_to_keep"):
        if name in params:
            return {name: 1}
    return {}


def layer_kv(kv: Any, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Post-rope keys and values of one layer, each [batch, kv_heads, seq, head_dim]."""
    if hasattr(kv, "layers"):
        return kv.layers[layer].keys, kv.layers[layer].values
    return kv.key_cache[layer], kv.value_cache[layer]


def layer_count(model: Any) -> int:
    config = (
        model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    )
    return int(config.num_hidden_layers)


def truncated(kv: Any, length: int, layers: int) -> Any:
    """A new cache holding the first `length` positions of `kv` (`crop` changed meaning
    between releases)."""
    out = new_cache()
    for layer in range(layers):
        k, v = layer_kv(kv, layer)
        out.update(k[:, :, :length], v[:, :, :length], layer)
    return out
