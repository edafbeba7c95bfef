"""Known engine faults, for checking that a probe finds them (test and acceptance use only).

Loaded by the tap's vLLM plugin entry point (forensics.tap.vllm_plugin.register) in every
process vLLM starts, and switched on only by KVFORENSICS_FAULT_STUB: a request whose id contains
that text runs as a 1-token stub, as in the incident this project was made for: the engine takes
all but its last prompt token as already computed without any prefix-cache hit, allocates fresh
blocks for the whole prompt (which still hold whatever earlier requests wrote there), computes
the last token only and attends over all of them. Several markers may be given, separated by
commas. Never set it on a server that serves customers."""

from __future__ import annotations

import os
from typing import Any

ENV = "KVFORENSICS_FAULT_STUB"
SMALL_POOL_ENV = "KVFORENSICS_FAULT_SMALL_POOL"
_INSTALLED = False


def markers() -> list[str]:
    return [m for m in os.environ.get(ENV, "").split(",") if m.strip()]


def _no_check(*_args: Any, **_kwargs: Any) -> None:
    """vLLM's start-up check that one full-length request fits the pool, skipped."""


def install() -> bool:
    """Patch vLLM's KV cache manager when ENV names request-id markers, and its start-up pool
    check when SMALL_POOL_ENV is 1; True when the stub fault is in."""
    global _INSTALLED
    if os.environ.get(SMALL_POOL_ENV) == "1":
        from vllm.v1.core import kv_cache_utils

        kv_cache_utils._check_enough_kv_cache_memory = _no_check
    wanted = markers()
    if _INSTALLED or not wanted:
        return _INSTALLED
    from vllm.v1.core.kv_cache_manager import KVCacheManager

    lookup = KVCacheManager.get_computed_blocks

    def get_computed_blocks(self: Any, request: Any) -> Any:
        if any(m in request.request_id for m in wanted) and request.num_tokens > 1:
            return self.empty_kv_cache_blocks, request.num_tokens - 1, 0
        return lookup(self, request)

    KVCacheManager.get_computed_blocks = get_computed_blocks
    _INSTALLED = True
    return True
