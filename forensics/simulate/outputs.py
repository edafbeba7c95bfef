"""The seam that decides each request's output token ids from what its decode really read.

The engine never looks at token contents; after the ledger is final, `reads.Sweep` calls an
`OutputModel` once per decoding request, in decode-start order, with:

- `processed`: the token ids the prefill computed (the prompt, or the 1-token stub);
- `view`: a ReadView of the request's first decode read: for each position i < billed prompt
  length, the request index and position of the KV's true author (a transfer write is traced back
  to the prefill KV it carried, so a prefix-cache collision shows its real author), or -1 where
  the slot was never written;
- `tokens_of(j)`: the positional token ids of writer j so far (index p = the token whose KV j
  wrote at position p: its processed prompt, then its generated tokens at the positions its decode
  node gave them; for a stub, positions 1 .. billed-1 hold 0 because it never wrote them).

`SyntheticModel` (the default) is a cheap deterministic hash of exactly that information (the
requests' sampling settings do not change it). `ReplayModel` calls forensics.replay.decode
(prefill_first_token, greedy_decode) so that a replay with the same model reproduces the outputs;
a request with a sampling temperature above 0 (`sampling`, a traffic.SamplingPlan) is sampled
instead, with its settings and seed (forensics.replay.sampling: prefill_logits, sampled_decode),
as a serving engine samples, so replay confirms it by evidence. Both are imported lazily."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from forensics.errors import StageUnavailable
from forensics.simulate.traffic import SamplingPlan

TokensOf = Callable[[int], np.ndarray]


@dataclass
class ReadView:
    request: int
    writer: np.ndarray  # int32, -1 = never written
    position: np.ndarray  # int64
    request_ids: Sequence[str]

    def slots(self) -> list[tuple[str, int] | None]:
        """The view as greedy_decode takes it: (writer request id, writer position) or None."""
        ids = self.request_ids
        return [
            None if w < 0 else (ids[w], p)
            for w, p in zip(self.writer.tolist(), self.position.tolist(), strict=True)
        ]

    def writers(self) -> list[int]:
        return [int(w) for w in np.unique(self.writer) if w >= 0]


class OutputModel(Protocol):
    vocab_size: int

    def first_token(self, processed: np.ndarray, request: int, /) -> int: ...

    def decode(
        self, view: ReadView, tokens_of: TokensOf, first_token: int, n_out: int
    ) -> list[int]: ...


def _digest_int(*parts: bytes) -> int:
    h = hashlib.blake2b(digest_size=8)
    for p in parts:
        h.update(p)
    return int.from_bytes(h.digest(), "little")


class SyntheticModel:
    """Deterministic stand-in: outputs are a hash of the token contents the read really saw."""

    def __init__(self, vocab_size: int):
        self.vocab_size = vocab_size

    def first_token(self, processed: np.ndarray, _request: int, /) -> int:
        return 1 + _digest_int(processed.astype("<i8").tobytes()) % (self.vocab_size - 1)

    def decode(
        self, view: ReadView, tokens_of: TokensOf, first_token: int, n_out: int
    ) -> list[int]:
        seen = np.full(len(view.writer), -1, np.int64)
        for w in view.writers():
            sel = view.writer == w
            seen[sel] = tokens_of(w)[view.position[sel]]
        seed = _digest_int(seen.astype("<i8").tobytes(), first_token.to_bytes(8, "little"))
        rng = np.random.default_rng(seed)
        rest = rng.integers(1, self.vocab_size, max(0, n_out - 1)).tolist()
        return [first_token, *rest][:n_out]


class ReplayModel:
    """The project's replay functions over a model object (the small deterministic test model
    or any model forensics.replay.decode accepts)."""

    def __init__(self, model: Any, vocab_size: int):
        try:
            from forensics.replay import decode as replay_decode
        except ImportError as exc:
            raise StageUnavailable(
                "--model test needs forensics.replay.decode and its extra; install it with "
                "`pip install 'kvforensics[replay]'`, or run without --model"
            ) from exc
        self._decode = replay_decode
        self.model = model
        self.vocab_size = vocab_size
        self.sampling: SamplingPlan | None = None  # None: every request greedy
        self._first_logits: dict[int, Any] = {}  # a sampled request's prefill logits

    def _sampled(self, request: int) -> Any:
        """The request's forensics.replay.sampling.Sampling when it samples, else None."""
        if self.sampling is None or self.sampling.temperature[request] <= 0:
            return None
        from forensics.replay.sampling import Sampling

        return Sampling(*self.sampling.settings(request))

    def first_token(self, processed: np.ndarray, request: int, /) -> int:
        setting = self._sampled(request)
        if setting is None:
            return int(self._decode.prefill_first_token(self.model, processed.tolist()))
        from forensics.replay.sampling import pick

        logits = self._decode.prefill_logits(self.model, processed.tolist()).float()
        self._first_logits[request] = logits
        return pick(logits, setting, setting.rng())  # sampled_decode's first draw

    def decode(
        self, view: ReadView, tokens_of: TokensOf, first_token: int, n_out: int
    ) -> list[int]:
        writers = {view.request_ids[w]: tokens_of(w).tolist() for w in view.writers()}
        setting = self._sampled(view.request)
        if setting is None:
            out = self._decode.greedy_decode(self.model, writers, view.slots(), first_token, n_out)
        else:
            from forensics.replay.sampling import sampled_decode

            logits = self._first_logits.pop(view.request)
            out = sampled_decode(self.model, writers, view.slots(), logits, n_out, setting)
        return [int(t) for t in out]


def _vocab_of(model: Any, default: int) -> int:
    """The model's vocabulary size (from its config, as transformers models keep it)."""
    found = getattr(getattr(model, "config", None), "vocab_size", None)
    found = found or getattr(model, "vocab_size", None)
    return int(found) if found else default


def load_model(name: str, vocab_size: int) -> OutputModel:
    """`synthetic` (default) or `test` (the replay package's small deterministic model)."""
    if name == "synthetic":
        return SyntheticModel(vocab_size)
    if name == "test":
        try:
            from forensics.replay.loader import load_test_model
        except ImportError as exc:
            raise StageUnavailable(
                "--model test needs the replay package's test model "
                "(forensics.replay.loader.load_test_model); install the replay extra or run "
                "with the default --model synthetic"
            ) from exc
        model = load_test_model()
        return ReplayModel(model, _vocab_of(model, vocab_size))
    from forensics.errors import UsageError

    raise UsageError(f"unknown --model '{name}'; use 'synthetic' or 'test'")
