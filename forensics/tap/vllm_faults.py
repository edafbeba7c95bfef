"""A known engine fault, for checking that a probe finds one (test and acceptance use only).

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
_INSTALLED = False


def markers() -> list[str]:
    return [m for m in os.environ.get(ENV, "").split(",") if m.strip()]


def install() -> bool:
    """Patch vLLM's KV cache manager when ENV names request-id markers; True when patched."""
    global _INSTALLED
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
