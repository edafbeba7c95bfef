"""Engine faults patched into a real vLLM (V1 core, engine core in this process) for
tests/support/vllm_run.py. Each is keyed by request id prefix or by a prompt's first block, and
what it did is recorded in FAULTS (written to run.json as the run's truth; request ids are the
gateway's):

- `stub-…`: the request runs as a 1-token stub: the engine takes all but its last prompt token
  as already computed without any prefix-cache hit, allocates fresh blocks for the whole
  prompt, computes the last token only and attends over all of them;
- `dup-…`: the request's last new block is the first block of the running `victim-…` request,
  handed out while the victim still holds it;
- a prefix-cache hash collision (`collide`): the first full block of a chosen prompt is given
  the block hash of another prompt's first block, so a request with that prompt is served the
  other request's cached KV as a prefix-cache hit."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from forensics.tap.vllm_steps import external_id

FAULTS: dict[str, Any] = {}
# first-block tokens of a receiver's prompt -> the first-block tokens whose hash it is given
COLLIDE: dict[tuple[int, ...], tuple[int, ...]] = {}


def install_faults() -> None:
    """The stub, the block handed out while held, and the hash collision."""
    from vllm.v1.core.kv_cache_manager import KVCacheManager

    lookup = KVCacheManager.get_computed_blocks
    allocate = KVCacheManager.allocate_slots

    def get_computed_blocks(self: Any, request: Any) -> Any:
        if request.request_id.startswith("stub-"):
            stubs = FAULTS.setdefault("stub", [])
            if external_id(request.request_id) not in stubs:
                stubs.append(external_id(request.request_id))
            return self.empty_kv_cache_blocks, request.num_tokens - 1, 0
        return lookup(self, request)

    def allocate_slots(self: Any, request: Any, *args: Any, **kwargs: Any) -> Any:
        if not request.request_id.startswith("dup-") or "dup" in FAULTS:
            return allocate(self, request, *args, **kwargs)
        victim = next(
            r
            for r in self.coordinator.single_type_managers[0].req_to_blocks
            if r.startswith("victim-")
        )
        block = self.get_block_ids(victim)[0][0]
        pool = self.block_pool
        fresh = pool.get_new_blocks

        def get_new_blocks(n: int) -> list[Any]:
            got = fresh(n - 1)
            stolen = pool.blocks[block]
            stolen.ref_cnt += 1
            return [*got, stolen]

        pool.get_new_blocks = get_new_blocks
        try:
            result = allocate(self, request, *args, **kwargs)
        finally:
            del pool.get_new_blocks
        FAULTS["dup"] = {
            "block": block,
            "victim": external_id(victim),
            "request": external_id(request.request_id),
        }
        return result

    KVCacheManager.get_computed_blocks = get_computed_blocks
    KVCacheManager.allocate_slots = allocate_slots
    _install_collision()


def _install_collision() -> None:
    """vLLM's request block hasher calls kv_cache_utils.hash_block_tokens by its module name:
    a first block (no parent hash) whose tokens are a key of COLLIDE is hashed as the tokens it
    maps to; every later block chains on that hash, as vLLM's own would."""
    from vllm.v1.core import kv_cache_utils

    original = kv_cache_utils.hash_block_tokens

    def hash_block_tokens(
        hash_function: Any,
        parent_block_hash: Any,
        curr_block_token_ids: Sequence[int],
        extra_keys: Any = None,
    ) -> Any:
        if not parent_block_hash:
            curr_block_token_ids = COLLIDE.get(
                tuple(curr_block_token_ids), tuple(curr_block_token_ids)
            )
        return original(hash_function, parent_block_hash, curr_block_token_ids, extra_keys)

    kv_cache_utils.hash_block_tokens = hash_block_tokens


def collide(receiver: str, prompt: Sequence[int], source: Sequence[int], block: int) -> None:
    """Give the first block of `prompt` (request `receiver`) the hash of `source`'s."""
    COLLIDE[tuple(prompt[:block])] = tuple(source[:block])
    FAULTS["collision"] = {"receiver": receiver, "blocks": 1}
