"""A vLLM start-up log's scheduler limits (what the reconstruction of a unified node hands to
vLLM's scheduler). The lines are vLLM 0.32's own format strings: `non-default args: %s` with
the dict of the arguments the operator set (vllm/entrypoints/utils.py), `Chunked prefill is
enabled with max_num_batched_tokens=%d.` (vllm/config/scheduler.py) and the engine banner
(VllmConfig.__str__)."""

from __future__ import annotations

from pathlib import Path

from forensics.logs.read import read_logs

HEAD = "(EngineCore_DP0 pid=77) INFO 12-04 22:52:01 [core.py:90] "
BANNER = (
    "Initializing a V1 LLM engine (v0.32.0) with config: model='/m/tiny', dtype=torch.float32, "
    "max_seq_len=512, tensor_parallel_size=1, enable_prefix_caching=True, "
    "enable_chunked_prefill={chunked}, seed=0"
)

CAPACITY = "GPU KV cache size: 1,280 tokens, Maximum concurrency for 512 tokens per request: 2.50x"


def _facts(tmp_path: Path, lines: list[str]) -> dict[str, object]:
    path = tmp_path / "vllm-0.log"
    path.write_text("".join(HEAD + line + "\n" for line in lines))
    (node,) = read_logs([(path, path.name, path.name)]).nodes
    return {k: f.value for k, f in node.runs[-1].facts.items()}


def test_the_limits_the_operator_set_and_the_budget_line_are_read(tmp_path: Path) -> None:
    facts = _facts(
        tmp_path,
        [
            "non-default args: {'model': '/m/tiny', 'max_model_len': 512, 'block_size': 32, "
            "'enable_prefix_caching': True, 'max_num_seqs': 8, 'max_num_batched_tokens': 96}",
            BANNER.format(chunked=True),
            "Chunked prefill is enabled with max_num_batched_tokens=96.",
            CAPACITY,
        ],
    )
    assert (facts["max_num_seqs"], facts["max_num_batched_tokens"]) == (8, 96)
    assert facts["chunked_prefill"] == "True"


def test_limits_not_logged_are_absent_and_chunking_off_is_kept(tmp_path: Path) -> None:
    facts = _facts(
        tmp_path,
        [
            BANNER.format(chunked=False),
            CAPACITY,
        ],
    )
    assert "max_num_seqs" not in facts and "max_num_batched_tokens" not in facts
    assert facts["chunked_prefill"] == "False"


def test_prefix_caching_is_read_from_the_banner_and_the_operators_args(tmp_path: Path) -> None:
    """vLLM's banner names enable_prefix_caching either way (VllmConfig.__str__); the
    reconstruction models the free queue as the engine ran it."""
    on = _facts(tmp_path, [BANNER.format(chunked=True), CAPACITY])
    assert on["prefix_caching"] == "True"
    off = _facts(
        tmp_path,
        [
            "non-default args: {'model': '/m/tiny', 'enable_prefix_caching': False}",
            BANNER.format(chunked=True).replace(
                "enable_prefix_caching=True", "enable_prefix_caching=False"
            ),
            CAPACITY,
        ],
    )
    assert off["prefix_caching"] == "False"
    without = _facts(
        tmp_path,
        [BANNER.format(chunked=True).replace("enable_prefix_caching=True, ", ""), CAPACITY],
    )
    assert "prefix_caching" not in without
