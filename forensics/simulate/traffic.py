"""Who asks what and when: arrivals with a daily rhythm, heavy-tailed account activity, prompt
lengths heavy-tailed up to the context length, output lengths, and the prompt token ids.

Everything is drawn from one numpy Generator seeded by the user's seed, so the same seed gives
the same traffic."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from forensics.simulate.config import Scenario

US_PER_DAY = 86_400_000_000
JURISDICTIONS = ("EU", "US-CA", "US-NY", "UK", "JP", "BR", "SG", "CA")


@dataclass
class Traffic:
    """Column arrays, one entry per request, sorted by arrival time."""

    request_ids: list[str]
    arrival_us: np.ndarray  # int64, microseconds since the Unix epoch
    account: np.ndarray  # int32 index into account_ids
    template: np.ndarray  # int32 global template id, -1 = none
    template_len: np.ndarray  # int64, tokens of the shared prefix (0 = none)
    prompt_len: np.ndarray  # int64, billed prompt tokens
    output_len: np.ndarray  # int64, tokens the request would generate
    prefill_node: np.ndarray  # int32 index among prefill nodes
    decode_node: np.ndarray  # int32 index among decode nodes
    abort: np.ndarray  # bool: the client gives up before the first token (late-transfer bug)
    account_ids: list[str]
    template_lengths: np.ndarray  # int64 per global template id
    words: int = 0  # Scenario.prompt_words: ids each prompt part is drawn from (0: the vocab)

    def __len__(self) -> int:
        return len(self.request_ids)


def _arrivals(rng: np.random.Generator, n: int, sc: Scenario) -> np.ndarray:
    """Arrival times with a daily rhythm (busy around 14:00 UTC, quiet at night)."""
    span_us = int(sc.days * US_PER_DAY)
    t = rng.random(n * 3) * span_us
    hour = (t % US_PER_DAY) / 3_600_000_000
    weight = 0.55 + 0.45 * np.cos((hour - 14.0) / 24.0 * 2 * np.pi)
    keep = rng.random(n * 3) < weight
    t = t[keep][:n]
    if len(t) < n:  # practically never: top up uniformly
        t = np.concatenate([t, rng.random(n - len(t)) * span_us])
    start_us = int(sc.start.timestamp() * 1_000_000)
    return np.sort(t.astype(np.int64)) + start_us


def _prompt_lengths(rng: np.random.Generator, n: int, sc: Scenario) -> np.ndarray:
    body = rng.lognormal(np.log(sc.body_cap), 1.0, n)
    low = np.log(sc.long_low * sc.context_len)
    long = np.exp(rng.uniform(low, np.log(sc.context_len), n))
    lengths = np.where(rng.random(n) < sc.long_share, long, body)
    lengths = np.clip(lengths.astype(np.int64), 2, sc.context_len)
    # a prompt within one page of the pool would pass admission yet never fit beside the
    # reserved page 0: such prompts are made one token longer than the pool instead
    edge = (lengths > sc.prefill_pool - sc.page_size) & (lengths <= sc.prefill_pool)
    over = sc.prefill_pool + 1
    return np.where(
        edge, over if over <= sc.context_len else sc.prefill_pool - sc.page_size, lengths
    )


def request_id(seed: int, i: int) -> str:
    """An engine-style request id (32 hex digits), deterministic in (seed, i)."""
    return hashlib.blake2b(f"{seed}:{i}".encode(), digest_size=16).hexdigest()


def make_traffic(n: int, seed: int, sc: Scenario) -> Traffic:
    """Draw n requests."""
    rng = np.random.default_rng([seed, 1])
    n_acc = sc.accounts or max(8, n // 40)
    activity = 1.0 / np.arange(1, n_acc + 1) ** 1.1  # Zipf-like: a few accounts dominate
    account = rng.choice(n_acc, size=n, p=activity / activity.sum()).astype(np.int32)
    n_tpl = n_acc * sc.templates_per_account
    page = sc.page_size
    tpl_lengths = rng.integers(2, 9, n_tpl).astype(np.int64) * page
    tpl_lengths = np.minimum(tpl_lengths, max(page, sc.body_cap // 2 // page * page))
    template = (
        account * sc.templates_per_account + rng.integers(0, sc.templates_per_account, n)
    ).astype(np.int32)
    prompt = _prompt_lengths(rng, n, sc)
    tlen = tpl_lengths[template]
    no_tpl = prompt <= tlen
    template = np.where(no_tpl, -1, template).astype(np.int32)
    tlen = np.where(no_tpl, 0, tlen)
    out = np.clip(rng.lognormal(np.log(sc.output_median), 0.9, n), 1, sc.output_max)
    return Traffic(
        request_ids=[request_id(seed, i) for i in range(n)],
        arrival_us=_arrivals(rng, n, sc),
        account=account,
        template=template,
        template_len=tlen.astype(np.int64),
        prompt_len=prompt,
        output_len=out.astype(np.int64),
        prefill_node=rng.integers(0, sc.prefill_nodes, n).astype(np.int32),
        decode_node=rng.integers(0, sc.decode_nodes, n).astype(np.int32),
        abort=rng.random(n) < sc.late_transfer_rate,
        account_ids=[f"acct-{i + 1:04d}" for i in range(n_acc)],
        template_lengths=tpl_lengths,
        words=sc.prompt_words,
    )


def _draw(rng: np.random.Generator, vocab: int, n: int, words: int) -> np.ndarray:
    """n token ids in [1, vocab): uniformly, or (words > 0) from `words` ids of their own, as
    text repeats its words."""
    if words <= 0:
        return rng.integers(1, vocab, n, dtype=np.int64)
    own = rng.choice(np.arange(1, vocab, dtype=np.int64), min(words, vocab - 1), replace=False)
    return rng.choice(own, n)


def template_tokens(seed: int, tpl: int, length: int, vocab: int, words: int = 0) -> np.ndarray:
    """The token ids of a shared prompt prefix (a system prompt)."""
    rng = np.random.default_rng([seed, 2, tpl])
    return _draw(rng, vocab, length, words)


def prompt_tokens(seed: int, i: int, traffic: Traffic, vocab: int) -> np.ndarray:
    """The full prompt token ids of request i: its template, then its own tokens."""
    tpl = int(traffic.template[i])
    tlen = int(traffic.template_len[i])
    rng = np.random.default_rng([seed, 3, i])
    own = _draw(rng, vocab, int(traffic.prompt_len[i]) - tlen, traffic.words)
    if tpl < 0:
        return own
    return np.concatenate([template_tokens(seed, tpl, tlen, vocab, traffic.words), own])


def prefix_hash(tokens: np.ndarray) -> str:
    """A strong content identity of a token prefix (what a fixed prefix cache would log)."""
    return "sha256:" + hashlib.sha256(tokens.astype("<i8").tobytes()).hexdigest()[:32]


# The mix of sampling settings a chat service's traffic shows: most requests sampled at a
# temperature of 0.7 to 1.0, often with nucleus sampling, some with top-k; a fifth greedy.
GREEDY_SHARE = 0.2
TEMPERATURES = (0.7, 0.8, 0.9, 1.0)
TOP_PS = (0.9, 0.95, 1.0)
TOP_KS = (0, 0, 0, 40)  # 0: no top-k


@dataclass(frozen=True)
class SamplingPlan:
    """Each request's sampling settings (forensics.replay.sampling.Sampling's fields), one entry
    per request: temperature 0 is greedy."""

    temperature: np.ndarray  # float64
    top_p: np.ndarray  # float64
    top_k: np.ndarray  # int64, 0 = no top-k
    seed: np.ndarray  # int64

    def settings(self, i: int) -> tuple[float, float, int, int]:
        """(temperature, top_p, top_k, seed) of request i."""
        return (
            float(self.temperature[i]),
            float(self.top_p[i]),
            int(self.top_k[i]),
            int(self.seed[i]),
        )


def make_sampling(n: int, seed: int, mode: str) -> SamplingPlan | None:
    """The requests' sampling settings: None for `greedy` (every request greedy, as before), a
    mix for `mixed`. Drawn from a stream of their own, so the traffic, ledger and ground truth
    are the same either way."""
    if mode == "greedy":
        return None
    if mode != "mixed":
        from forensics.errors import UsageError

        raise UsageError(f"unknown --sampling '{mode}'; use 'mixed' or 'greedy'")
    rng = np.random.default_rng([seed, 7])
    greedy = rng.random(n) < GREEDY_SHARE
    temperature = np.where(greedy, 0.0, rng.choice(TEMPERATURES, n))
    top_p = np.where(greedy, 1.0, rng.choice(TOP_PS, n))
    top_k = np.where(greedy, 0, rng.choice(TOP_KS, n)).astype(np.int64)
    return SamplingPlan(temperature, top_p, top_k, rng.integers(0, 2**31, n, dtype=np.int64))
