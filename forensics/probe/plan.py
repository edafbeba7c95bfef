"""What a probe run sends: how many requests, how long, in which order, at what concurrency,
and the canary markers in each prompt.

Every prompt is made of markers: runs of MARKER_LEN token ids (or, for text prompts, words
around a marker word `kvf<tag>p<probe>m<marker>`) drawn from the run's own random stream, so no
two probes share a marker and no run of MARKER_LEN tokens of one prompt occurs in another.
A response that carries a run of another probe's prompt carries that probe's marker.

Long probes fill the KV pool: their lengths are spread over the longest prompt the endpoint
takes (the advertised context length less the tokens asked for), and enough of them run at
once to need more pages than the pool holds, so pages are freed and handed to later probes.
Short probes (a few pages) run between them: their pages are the ones a 1-token stub would
attend over."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from enum import StrEnum

from forensics.errors import UsageError

MARKER_LEN = 8  # tokens (or words) in a marker, and the shortest run that counts as foreign
TOKEN_LOW, TOKEN_HIGH = 3, 512  # token ids drawn from [low, high): valid in any vocabulary >= 512
LONG_FRACTIONS = (1.0, 0.55, 0.85, 0.4, 0.7, 0.95, 0.6, 0.8)
SHORT_EVERY = 3  # one short probe after every two long ones
SHORT_PAGES = 3
DEFAULT_PAGE = 16
MAX_CONCURRENCY = 16
_FILLER = (
    "amber basin cedar delta ember fjord garnet harbor island juniper kestrel lagoon meadow "
    "nectar orchid pebble quartz raven saffron timber umber valley willow yarrow zephyr"
).split()


class Api(StrEnum):
    TOKENS = "tokens"  # /v1/completions with token-id prompts
    TEXT = "text"  # /v1/completions with text prompts
    CHAT = "chat"  # /v1/chat/completions


@dataclass(frozen=True)
class Endpoint:
    """What the endpoint says about itself (client.discover)."""

    url: str
    model: str
    context_len: int | None
    pool_tokens: int | None  # the engine's KV pool in tokens, where it publishes it
    page_size: int | None
    engine: str | None  # vllm, sglang or None
    pool_source: str  # where pool_tokens and page_size came from


@dataclass(frozen=True)
class Probe:
    index: int
    kind: str  # long or short
    request_id: str  # sent as X-Request-Id
    account: str
    length: int  # prompt tokens (token prompts) or words (text prompts) aimed at
    max_tokens: int


@dataclass(frozen=True)
class Plan:
    tag: str  # the run's tag: in every request id and marker
    api: Api
    probes: tuple[Probe, ...]
    concurrency: int
    max_tokens: int
    longest: int
    page_size: int

    @property
    def tokens_in_flight(self) -> int:
        """Prompt tokens of the `concurrency` longest probes: what the pool must hold at once."""
        lengths = sorted((p.length for p in self.probes), reverse=True)
        return sum(lengths[: self.concurrency])


def longest_prompt(endpoint: Endpoint, max_tokens: int, context_len: int | None) -> int:
    """The longest prompt to send: the context length (given, else advertised) less the tokens
    asked for."""
    context = context_len or endpoint.context_len
    if not context:
        raise UsageError(
            f"{endpoint.url} does not say its context length (/v1/models max_model_len); "
            "give it with --context-len"
        )
    if context <= max_tokens + MARKER_LEN:
        raise UsageError(
            f"the context length {context} leaves no room for a prompt and --max-tokens "
            f"{max_tokens}; give a smaller --max-tokens"
        )
    return context - max_tokens


def make_plan(
    endpoint: Endpoint,
    tag: str,
    api: Api,
    max_requests: int,
    max_tokens: int,
    concurrency: int | None,
    context_len: int | None = None,
) -> Plan:
    """The probes, in the order they are sent. Where the published pool cannot hold the
    longest prompt, long probes fit the pool and the last probe crosses it (kind `cross`, the
    longest prompt): an engine that accepts it without the pages to hold it runs it over pages
    it does not own, or never answers it."""
    longest = longest_prompt(endpoint, max_tokens, context_len)
    page = endpoint.page_size or DEFAULT_PAGE
    short = min(longest, SHORT_PAGES * page)
    pool = endpoint.pool_tokens
    crosses = pool is not None and pool - max_tokens < longest
    fit = max(short, (pool or 0) - max_tokens - page) if crosses else longest
    probes: list[Probe] = []
    k_long = 0
    for index in range(max_requests):
        if crosses and index == max_requests - 1:
            kind, length = "cross", longest
        elif index % SHORT_EVERY == SHORT_EVERY - 1:
            kind, length = "short", short
        else:
            fraction = LONG_FRACTIONS[k_long % len(LONG_FRACTIONS)]
            kind, length = "long", max(short, int(fit * fraction))
            k_long += 1
        rid = f"kvfprobe-{tag}-n{index:03d}"
        probes.append(Probe(index, kind, rid, f"probe-{index:03d}", length, max_tokens))
    workers = concurrency or _concurrency(pool, fit)
    return Plan(tag, api, tuple(probes), workers, max_tokens, longest, page)


def _concurrency(pool: int | None, longest: int) -> int:
    """Enough long probes at once to need more than the pool (one more than it holds), at
    least 2; 4 where the pool is not published."""
    if not pool:
        return 4
    return max(2, min(MAX_CONCURRENCY, math.ceil(pool / (0.7 * longest)) + 1))


def new_tag() -> str:
    """A fresh tag for each run, so that no probe hits an earlier run's prefix cache."""
    return f"{random.SystemRandom().getrandbits(32):08x}"


def token_prompt(tag: str, probe: Probe) -> list[int]:
    """The probe's token ids: its length rounded down to whole markers (at least one)."""
    rng = random.Random(f"kvfprobe:{tag}:{probe.index}")
    n = max(MARKER_LEN, probe.length - probe.length % MARKER_LEN)
    return [rng.randrange(TOKEN_LOW, TOKEN_HIGH) for _ in range(n)]


def marker_word(tag: str, probe: int, marker: int) -> str:
    return f"kvf{tag}p{probe:03d}m{marker:03d}"


def text_words(tag: str, probe: Probe) -> list[str]:
    """The probe's words: each marker is a marker word followed by MARKER_LEN - 1 filler words;
    about one word per token is aimed at (usage tells the true count)."""
    rng = random.Random(f"kvfprobe:{tag}:{probe.index}")
    markers = max(1, probe.length // (2 * MARKER_LEN))
    words: list[str] = []
    for m in range(markers):
        words.append(marker_word(tag, probe.index, m))
        words.extend(rng.choice(_FILLER) for _ in range(MARKER_LEN - 1))
    return words


def marker_id(probe: int, marker: int) -> str:
    return f"p{probe:03d}.m{marker:03d}"


def describe(plan: Plan, endpoint: Endpoint) -> list[str]:
    """The plan in lines, for --dry-run and the progress log."""
    longs = [p.length for p in plan.probes if p.kind == "long"]
    shorts = [p.length for p in plan.probes if p.kind == "short"]
    cross = [p.length for p in plan.probes if p.kind == "cross"]
    unit = "tokens" if plan.api == Api.TOKENS else "words"
    pool = (
        f"{endpoint.pool_tokens:,} tokens ({endpoint.pool_source})"
        if endpoint.pool_tokens
        else "not published by the endpoint"
    )
    return [
        f"endpoint {endpoint.url}, model {endpoint.model}, engine {endpoint.engine or 'unknown'}",
        f"context length {endpoint.context_len or 'not advertised'}, KV pool {pool}",
        f"{len(plan.probes)} requests ({plan.api.value} API): {len(longs)} long "
        f"({min(longs, default=0)}-{max(longs, default=0)} {unit}), {len(shorts)} short "
        f"({min(shorts, default=0)} {unit})"
        + (f", 1 last crossing the pool ({cross[0]} {unit})" if cross else "")
        + f", {plan.max_tokens} tokens asked of each",
        f"concurrency {plan.concurrency}: up to {plan.tokens_in_flight:,} prompt tokens in flight",
        f"markers: runs of {MARKER_LEN} {unit} unique to each probe; request ids "
        f"kvfprobe-{plan.tag}-nNNN",
        "looks for: another probe's marker or a run of "
        f"{MARKER_LEN}+ of its prompt in a response; a first token too fast for the prompt; "
        "usage that does not match what was sent; cached tokens no cache could hold; a KV "
        "pool smaller than the context length",
    ]
