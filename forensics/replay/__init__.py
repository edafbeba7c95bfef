"""Replay: confirm contamination by re-running suspects through a real model from the KV they
actually read (docs/DESIGN.md §5). Needs the optional `replay` extra (torch, transformers,
safetensors)."""

from __future__ import annotations

from dataclasses import dataclass
from importlib.util import find_spec

from forensics.errors import UsageError

INSTALL_HINT = "pip install 'kvforensics[replay]'"


def replay_available() -> bool:
    """True when torch, transformers and safetensors can be imported."""
    return all(find_spec(name) is not None for name in ("torch", "transformers", "safetensors"))


@dataclass(frozen=True)
class SpeedOptions:
    """Replay speed against the model's own prefill (`kvforensics bench --replay`,
    scripts/replay_bench.py --speed): the model (random-1b / random-tiny, made on the device
    with random weights, or 'test' or a model folder), the context lengths in tokens and, per
    context, how many earlier requests wrote the KV the stub suspect read."""

    model: str = "random-1b"
    contexts: str = "8192,131072,1048576"
    leakers: str = "1,1,64"
    output_tokens: int = 16

    def context_list(self) -> list[int]:
        return _positive_ints("--contexts", self.contexts)

    def leaker_list(self) -> list[int]:
        """One count per context (the last one repeated), each at most its context."""
        contexts = self.context_list()
        given = _positive_ints("--leakers", self.leakers)
        counts = (given + [given[-1]] * len(contexts))[: len(contexts)]
        for context, n in zip(contexts, counts, strict=True):
            if n > context:
                raise UsageError(f"--leakers {n} is more than the {context}-token context")
        return counts


def _positive_ints(flag: str, text: str) -> list[int]:
    try:
        values = [int(part) for part in text.split(",")]
    except ValueError:
        values = []
    if not values or min(values) < 1:
        raise UsageError(f"{flag} {text!r}: give positive whole numbers separated by commas")
    return values
