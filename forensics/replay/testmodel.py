"""The project's small deterministic test model, the device a replay runs on, and exact
float32 there (real model directories are loaded by loader.py).

The test model is a real transformers causal LM (Llama architecture: RMSNorm, rotary position
embeddings, grouped-query attention) with a tiny config. Its weights come from numpy's
`default_rng(seed)` in float32, never from torch's generator, so they are bit-identical across
torch versions and devices, and nothing is downloaded. The sample incident's outputs were made
with it, so the sample replays end to end on a CPU in seconds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from forensics.errors import UsageError

TEST_MODEL = "test"
TEST_MODEL_NAME = "kvforensics/test-llama-tiny"
TEST_SEED = 20240827
TEST_CONFIG: dict[str, Any] = {
    "vocab_size": 384,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 3,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 1 << 21,
    "rms_norm_eps": 1e-6,
    "tie_word_embeddings": False,
    "bos_token_id": None,
    "eos_token_id": None,
    "pad_token_id": None,
}


def _config() -> Any:
    from transformers import LlamaConfig

    config = LlamaConfig(**TEST_CONFIG)
    config._attn_implementation = "eager"
    config.name_or_path = TEST_MODEL_NAME
    return config


def _weight(rng: np.random.Generator, name: str, shape: tuple[int, ...]) -> np.ndarray:
    """One parameter: norms are ones, embeddings N(0, 1), linear maps N(0, 1/fan_in)."""
    if name.endswith("norm.weight"):
        return np.ones(shape, dtype=np.float32)
    scale = 1.0 if "embed_tokens" in name else 1.0 / np.sqrt(shape[-1])
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def generated_weights(seed: int = TEST_SEED) -> dict[str, np.ndarray]:
    """The test model's weights, by parameter name, generated in sorted name order."""
    import torch

    with torch.device("meta"):
        from transformers import LlamaForCausalLM

        shapes = {n: tuple(t.shape) for n, t in LlamaForCausalLM(_config()).state_dict().items()}
    rng = np.random.default_rng(seed)
    return {name: _weight(rng, name, shapes[name]) for name in sorted(shapes)}


def build_test_model(device: str = "cpu", seed: int = TEST_SEED, attn: str = "fast") -> Any:
    """The test model on `device`, in float32, in eval mode, with replay's fast attention
    (attn='fast') or its step-by-step eager attention (attn='eager')."""
    import torch
    from transformers import LlamaForCausalLM

    from forensics.replay import attention

    state = {n: torch.from_numpy(a) for n, a in generated_weights(seed).items()}
    model: Any = LlamaForCausalLM(_config())
    model.load_state_dict(state, strict=True)
    _neutral_generation_config(model)
    attention.use(model, attention.EAGER if attn == "eager" else attention.FAST)
    return model.to(device).eval()


def _neutral_generation_config(model: Any) -> None:
    """Greedy, no end-of-sequence token: `generate` runs for exactly the tokens asked."""
    gen = model.generation_config
    gen.do_sample = False
    gen.eos_token_id = None
    gen.bos_token_id = None
    gen.pad_token_id = 0


def save_test_model(path: Path, seed: int = TEST_SEED) -> Path:
    """Write the test model as a Hugging Face model directory (config.json, model.safetensors)."""
    model = build_test_model("cpu", seed)
    model.save_pretrained(path, safe_serialization=True)
    return path


def resolve_device(device: str) -> str:
    """'auto' -> 'cuda' when a CUDA device is present, else 'cpu'; 'cpu'/'cuda' as given."""
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device not in ("cpu", "cuda") and not device.startswith("cuda:"):
        raise UsageError(f"unknown device '{device}'; use auto, cpu or cuda")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise UsageError(
            "--device cuda was asked for but no CUDA device is visible; use --device auto or cpu"
        )
    return device


def exact_float32(device: str) -> None:
    """The test model's matrices are tiny: on a CPU extra threads only add waiting; on CUDA,
    TF32 would round float32 matmuls and could flip a near tie between CPU and GPU."""
    import torch

    if device == "cpu":
        torch.set_num_threads(1)
    else:
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
