"""Replay: confirm contamination by re-running suspects through a real model from the KV they
actually read (docs/DESIGN.md §5). Needs the optional `replay` extra (torch, transformers,
safetensors)."""

from __future__ import annotations

from importlib.util import find_spec

INSTALL_HINT = "pip install 'kvforensics[replay]'"


def replay_available() -> bool:
    """True when torch, transformers and safetensors can be imported."""
    return all(find_spec(name) is not None for name in ("torch", "transformers", "safetensors"))
