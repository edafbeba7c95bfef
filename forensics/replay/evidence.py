"""The evidence a delivered output gives: how much more likely it is under the KV the suspect
really read than under its own clean prompt (docs/DESIGN.md §5).

Both replays score the delivered output tokens teacher-forced (the delivered tokens are fed, not
the replay's own choices), at the request's sampling temperature (1 when the log has none, or
for greedy requests). Per delivered token, log2 p_contaminated - log2 p_clean; their sum is the
log-likelihood ratio (LLR) in bits.

The threshold follows from one fact: when the delivered output was sampled from the clean
distribution (a request that was not contaminated), the likelihood ratio 2^LLR has expectation 1
whatever the contaminated distribution is (per token, sum_t p_clean(t) p_cont(t) / p_clean(t) = 1,
and the product over tokens is a martingale), so P(LLR >= b) <= 2^-b (Markov's inequality; Ville's
for the running sum). At THRESHOLD_BITS = 10 a clean request is confirmed with probability at most
2^-10 (one in 1,024 suspects), for any model and any output length; scripts/replay_threshold.py
measures it with the test model (no control of 400 reached it).

A confirmation also needs the delivered output to be plausible under the contaminated KV: its
log2-probability there not far below what sampling at that temperature gives (top-p/top-k only
raise it), so a rebuilt KV that explains the output better than the clean prompt but still badly
(the engine read something else) is not taken for proof."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

THRESHOLD_BITS = 10.0  # LLR needed to confirm: a clean request passes with probability <= 2^-10
PLAUSIBLE_Z = 4.0  # standard deviations the output may fall below sampling's expected log2-prob
ROWS_PER_BLOCK = 256  # logit rows turned into scores at a time (rows x vocabulary floats)
_LN2 = math.log(2.0)


@dataclass
class TokenScores:
    """Per delivered token, under one replay: log2 p of the token, the expectation and variance
    of log2 p of a token sampled there, and the replay's greedy choice."""

    bits: list[float] = field(default_factory=list)
    expected: list[float] = field(default_factory=list)
    variance: list[float] = field(default_factory=list)
    greedy: list[int] = field(default_factory=list)

    def __add__(self, other: TokenScores) -> TokenScores:
        return TokenScores(
            self.bits + other.bits,
            self.expected + other.expected,
            self.variance + other.variance,
            self.greedy + other.greedy,
        )


def scoring_temperature(temperature: float | None) -> float:
    """The temperature scores are taken at: the request's when it sampled (> 0), else 1."""
    if temperature is None or not math.isfinite(temperature) or temperature <= 0:
        return 1.0
    return float(temperature)


def score(logits: torch.Tensor, targets: Sequence[int], temperature: float = 1.0) -> TokenScores:
    """Scores of targets[i] under logits[i] ([n, vocab] or [vocab] for one token)."""
    rows = logits.reshape(-1, logits.shape[-1])
    if rows.shape[0] != len(targets):
        raise ValueError(f"{rows.shape[0]} logit rows for {len(targets)} delivered tokens")
    out = TokenScores()
    for lo in range(0, len(targets), ROWS_PER_BLOCK):
        block = rows[lo : lo + ROWS_PER_BLOCK].float() / temperature
        log2p = torch.log_softmax(block, dim=-1) / _LN2
        p = torch.softmax(block, dim=-1)
        mean = (p * log2p).sum(-1)
        var = ((p * log2p * log2p).sum(-1) - mean * mean).clamp_min(0.0)
        want = torch.tensor(list(targets[lo : lo + ROWS_PER_BLOCK]), device=rows.device)
        out.bits += log2p.gather(-1, want.unsqueeze(-1)).squeeze(-1).tolist()
        out.expected += mean.tolist()
        out.variance += var.tolist()
        out.greedy += torch.argmax(block, dim=-1).tolist()
    return out


@dataclass(frozen=True)
class Evidence:
    """The log-likelihood ratio of the delivered output, contaminated against clean, and the
    per-token picture."""

    bits: float  # sum over delivered tokens of log2 p_contaminated - log2 p_clean
    tokens: int  # delivered tokens scored
    favour_contaminated: int  # tokens more likely under the KV it read
    favour_clean: int  # tokens more likely under its own prompt
    largest_for: float  # the largest single-token contribution towards contamination (bits)
    largest_against: float  # the largest towards the clean prompt (bits, <= 0)
    contaminated_bits_per_token: float  # mean log2 p of a delivered token, contaminated
    sampling_bits_per_token: float  # mean log2 p that sampling there would give
    plausibility_z: float  # (observed - expected) / standard deviation, summed over tokens
    temperature: float  # the temperature scored at

    @property
    def strong(self) -> bool:
        return self.bits >= THRESHOLD_BITS

    @property
    def plausible(self) -> bool:
        return self.plausibility_z >= -PLAUSIBLE_Z

    def summary(self) -> str:
        """The figures in words, for a verdict's reason."""
        return (
            f"{self.bits:+.1f} bits over {self.tokens} delivered tokens "
            f"({self.favour_contaminated} favour the KV it read, {self.favour_clean} its own "
            f"prompt; largest single token {self.largest_for:+.1f} / "
            f"{self.largest_against:+.1f} bits)"
        )

    def fit(self) -> str:
        return (
            f"{self.contaminated_bits_per_token:.2f} bits per token under the KV it read, "
            f"sampling at temperature {self.temperature:g} gives "
            f"{self.sampling_bits_per_token:.2f} on average (z {self.plausibility_z:+.1f})"
        )


def weigh(dirty: TokenScores, clean: TokenScores, temperature: float) -> Evidence | None:
    """The evidence from both replays' scores of the same delivered tokens (None if unscored)."""
    n = min(len(dirty.bits), len(clean.bits))
    if n == 0:
        return None
    diffs = [d - c for d, c in zip(dirty.bits[:n], clean.bits[:n], strict=True)]
    observed = sum(dirty.bits[:n])
    expected = sum(dirty.expected[:n])
    spread = math.sqrt(sum(dirty.variance[:n])) or 1e-9
    return Evidence(
        bits=round(sum(diffs), 6),
        tokens=n,
        favour_contaminated=sum(1 for d in diffs if d > 0),
        favour_clean=sum(1 for d in diffs if d < 0),
        largest_for=round(max(0.0, *diffs), 6),
        largest_against=round(min(0.0, *diffs), 6),
        contaminated_bits_per_token=round(observed / n, 6),
        sampling_bits_per_token=round(expected / n, 6),
        plausibility_z=round(max(-1e6, (observed - expected) / spread), 6),
        temperature=temperature,
    )
