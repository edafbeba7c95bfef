"""The options of the commands, as typed values: the fixed choices as enums, and for each command
that runs stages a frozen dataclass built once from its parameters, checked when built, and read
by the stages. Every default is defined here, once; the command line takes its defaults from
these classes.

A leaf module: it imports nothing from the command line, the pipeline or the stages."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any, TypeVar

from forensics.base.hashing import sha256_file
from forensics.base.isotime import scope_time
from forensics.errors import UsageError

E = TypeVar("E", bound=StrEnum)


class Device(StrEnum):
    """Where replay runs: auto is CUDA when present, else the CPU."""

    AUTO = "auto"
    CPU = "cpu"
    CUDA = "cuda"


class Allocator(StrEnum):
    """The allocator reconstruct drives: auto picks each node's engine's own (LIFO if unknown)."""

    AUTO = "auto"
    LIFO = "lifo"
    SGLANG = "sglang"
    VLLM = "vllm"


class FreeList(StrEnum):
    """Where an SGLang node's allocator puts freed pages back: every way it has been built
    (any), the one the node's SGLang release builds for its role (version), or the one
    stated."""

    ANY = "any"
    VERSION = "version"  # as the node's release builds it (reconstruct/freelist.py)
    STAGED = "staged"  # staged, merged back sorted when the free list runs short (need_sort)
    FRONT = "front"  # at the front: the most recently freed handed out first
    BACK = "back"  # at the end (page size 1): the least recently freed handed out first


class SimAllocator(StrEnum):
    """The page pool of the simulator: its own LIFO pool, or an engine's real allocator."""

    LIFO = "lifo"
    SGLANG = "sglang"
    VLLM = "vllm"


class Bug(StrEnum):
    """An engine bug the simulator can switch on; NONE switches every bug off."""

    OVERSIZE_STUB = "oversize-stub"
    LATE_TRANSFER = "late-transfer"
    DOUBLE_ALLOC = "double-alloc"
    PREFIX_COLLISION = "prefix-collision"
    NONE = "none"


class OutputModel(StrEnum):
    """What makes the simulated outputs: a hash of the prompt, or the replay test model."""

    SYNTHETIC = "synthetic"
    TEST = "test"


class SimSampling(StrEnum):
    """How the simulated requests decode: a realistic mix of sampling settings (most sampled at
    a temperature above 0, some greedy), or every request greedy (no sampling columns)."""

    MIXED = "mixed"
    GREEDY = "greedy"


class Mix(StrEnum):
    """The traffic of the scale benchmark: chat prompts, long-context requests, or both with
    their analyses timed alternately (forensics.bench.pair)."""

    SHORT = "short"
    LONG = "long"
    BOTH = "both"


class Engine(StrEnum):
    """A serving engine the KV ledger tap can run."""

    SGLANG = "sglang"
    VLLM = "vllm"


@dataclass(frozen=True)
class Bound:
    """The values a numeric option takes: finite, from low to high (low itself only when
    low_ok), and why a value above high is refused."""

    low: float
    high: float
    low_ok: bool = True
    above: str = "more than the toolkit is built for"


_HOURS = "a run that long would take hours"
_SEED = Bound(0, 2**32 - 1, above="a seed is a 32-bit number")
# Every numeric option of every command, by flag (tests/run/test_custody.py walks them all).
LIMITS: dict[str, Bound] = {
    "--window-s": Bound(0, 90 * 86_400, low_ok=False, above="90 days is the longest window"),
    "--ttft-factor": Bound(1, 1e6, above="no prefill is a million times faster than normal"),
    "--workers": Bound(1, 1024, above="more workers than any machine has cores"),
    "--orders": Bound(1, 10_000, above=f"{_HOURS}: each order drives the allocator again"),
    "--skew-ms": Bound(0, 3_600_000, above="an hour of clock skew orders nothing"),
    "--delivery-jitter-ms": Bound(0, 60_000, above="a minute between one step's outputs"),
    "--replay-budget": Bound(0, 1_000, above=f"{_HOURS}: each layout is a replay"),
    "--requests": Bound(1, 10_000_000, above=_HOURS),
    "--seed": _SEED,
    "--scale": Bound(0, 100, low_ok=False, above=f"{_HOURS}: every size grows by it"),
    "--days": Bound(0, 366, low_ok=False, above="a year is the longest traffic window"),
    "--prompt-words": Bound(0, 1_000_000, above="more token ids than any vocabulary has"),
    "--events": Bound(1, 2_000_000_000, above=_HOURS),
    "--repeat": Bound(1, 100, above=_HOURS),
    "--max-requests": Bound(1, 100_000, above=_HOURS),
    "--max-tokens": Bound(1, 1_000_000, above="no probe needs a longer answer"),
    "--concurrency": Bound(0, 1024, above="more requests at once than any engine batches"),
    "--context-len": Bound(0, 1 << 40, above="no model has such a context"),
    "--timeout": Bound(0, 7 * 86_400, low_ok=False, above="a week is the longest probe"),
}


def check_number(flag: str, value: float) -> None:
    """A UsageError (exit 2) naming the option, the value and the range when the value is not
    finite or out of the option's range (LIMITS)."""
    bound = LIMITS[flag]
    low = _shown(bound.low) + ("" if bound.low_ok else " (excluded)")
    where = f"from {low} to {_shown(bound.high)}"
    if not math.isfinite(value):
        raise UsageError(f"{flag} {value}: give a finite number, {where}")
    if value < bound.low or (value == bound.low and not bound.low_ok):
        raise UsageError(f"{flag} {_shown(value)} is too small: give a number {where}")
    if value > bound.high:
        raise UsageError(
            f"{flag} {_shown(value)} is too large ({bound.above}): give a number {where}"
        )


def _shown(value: float) -> str:
    return f"{int(value):,}" if value == int(value) and abs(value) < 1e18 else f"{value:g}"


def _enum(kind: type[E], value: str | E, option: str) -> E:
    """`value` as a member of `kind`; a UsageError naming the option and the choices if not."""
    try:
        return kind(value)
    except ValueError:
        known = ", ".join(m.value for m in kind)
        raise UsageError(f"{option} '{value}' is not one of {known}") from None


@dataclass(frozen=True)
class SimOptions:
    """`kvforensics simulate`: the simulated traffic, the engine's bugs and what is written."""

    requests: int = 500
    seed: int = 0  # the same seed gives the same files
    scale: float = 1.0  # every size (context, pools, lengths) shrunk by this factor
    bugs: frozenset[str] = frozenset({Bug.OVERSIZE_STUB.value})
    fixed_at: datetime | None = None  # over-long prompts refused with HTTP 400 from then on
    truth: bool = True
    contents: bool = True
    model: str = OutputModel.SYNTHETIC.value
    sampling: str = SimSampling.MIXED.value  # per-request sampling settings, or greedy only
    days: float = 14.0  # the traffic window
    flush_rows: int = 1 << 20
    allocator: str = SimAllocator.LIFO.value
    overrides: tuple[tuple[str, Any], ...] = ()  # other Scenario fields, e.g. bug rates


@dataclass(frozen=True)
class ScreeningParams:
    """The screening thresholds (see forensics.analysis.screening)."""

    window_s: float = 600.0  # seconds before a suspect in which same-node requests may leak
    ttft_factor: float = 10.0  # time to first token this many times too short is suspect
    mad_k: float = 4.0
    min_prompt: int = 256
    min_normal: int = 5
    # the most (second reader, leaker) pairs through a stub's cached pages listed one by one;
    # beyond it they are condensed to what the lists need (queries/analysis/possible_cache_hits.sql)
    second_read_pairs: int = 2_000_000


@dataclass(frozen=True)
class AnalysisOptions:
    """`kvforensics analyze`: the screening thresholds on the command line, and where the
    per-node sweep runs."""

    window_s: float = ScreeningParams.window_s
    ttft_factor: float = ScreeningParams.ttft_factor
    workers: int = 2  # nodes swept in parallel
    ray: str | None = None  # Ray cluster address, or "local"; None: the local engine

    def __post_init__(self) -> None:
        check_number("--window-s", self.window_s)
        check_number("--ttft-factor", self.ttft_factor)
        check_number("--workers", self.workers)

    def screening(self) -> ScreeningParams:
        return ScreeningParams(window_s=self.window_s, ttft_factor=self.ttft_factor)


@dataclass(frozen=True)
class ReconstructOptions:
    """`kvforensics reconstruct`: how ledger-less nodes' page traces are rebuilt."""

    allocator: Allocator = Allocator.AUTO
    free_list: FreeList = FreeList.VERSION  # SGLang nodes: how freed pages go back
    orders: int = 8  # orders sampled for reads past the limit of every order followed
    # operations closer than this are not ordered by their timestamps: 25 ms, since 5 ms let a
    # gateway with 20 ms of noise clear a true leaker (docs/guides/without-a-ledger.md)
    skew_ms: float = 25.0
    replay_budget: int = 4  # layouts replayed per stub receiver (0: replay decides nothing)
    replay_model: str | None = None  # None: the test model when the request log names it
    replay_device: Device = Device.AUTO
    # the most one engine step's outputs can be logged apart by the gateway; None: not known,
    # so a node whose logged times do not mark its steps clears nobody
    delivery_jitter_ms: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "allocator", _enum(Allocator, self.allocator, "--allocator"))
        free_list = _enum(FreeList, self.free_list, "--sglang-free-list")
        object.__setattr__(self, "free_list", free_list)
        if self.delivery_jitter_ms is not None:
            check_number("--delivery-jitter-ms", self.delivery_jitter_ms)
        device = _enum(Device, self.replay_device, "--replay-device")
        object.__setattr__(self, "replay_device", device)
        check_number("--replay-budget", self.replay_budget)
        check_number("--orders", self.orders)
        check_number("--skew-ms", self.skew_ms)


@dataclass(frozen=True)
class ReplayOptions:
    """`kvforensics replay`: the model, where it runs, and which suspects."""

    model: str | None = None  # None: the test model when the case was served by it
    served_model: str | None = None  # the request log's name for the model, when it differs
    device: Device = Device.AUTO
    device_map: str | None = None  # auto: spread the model over every visible GPU
    requests: tuple[str, ...] = ()  # empty: every suspect

    def __post_init__(self) -> None:
        object.__setattr__(self, "device", _enum(Device, self.device, "--device"))
        object.__setattr__(self, "requests", tuple(self.requests))


@dataclass(frozen=True)
class Scope:
    """What the lists, the report and the figures cover (--since, --until, --account): an
    exposure whose receiving read is in [since, until) and, when accounts are given, whose
    receiving or leaking request belongs to one of them. Nothing given: the whole case."""

    since: datetime | None = None
    until: datetime | None = None
    accounts: tuple[str, ...] = ()

    @property
    def whole(self) -> bool:
        return self.since is None and self.until is None and not self.accounts

    def record(self) -> dict[str, Any]:
        """For the manifest and summary.json: times as ISO-8601 UTC, accounts sorted."""
        return {
            "whole_case": self.whole,
            "since": _iso(self.since),
            "until": _iso(self.until),
            "accounts": sorted(self.accounts),
        }

    def words(self) -> str:
        """The scope in a phrase, for the report's header and the terminal."""
        if self.whole:
            return "the whole case"
        parts = []
        if self.since is not None:
            parts.append(f"receiving reads from {_iso(self.since)}")
        if self.until is not None:
            parts.append(f"before {_iso(self.until)}")
        if self.accounts:
            parts.append("accounts " + ", ".join(sorted(self.accounts)) + " (either side)")
        return "; ".join(parts)


def _iso(value: datetime | None) -> str | None:
    if value is None:
        return None
    return value.astimezone(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def make_scope(
    since: str | None, until: str | None, accounts: tuple[str, ...] | list[str] | None
) -> Scope:
    """The scope from the options' text; UsageError for a time ingest would not read, or an
    empty period."""
    start = scope_time(since, "--since") if since else None
    end = scope_time(until, "--until") if until else None
    if start is not None and end is not None and end <= start:
        raise UsageError(f"--until {until} is not after --since {since}: the period is empty")
    return Scope(start, end, tuple(dict.fromkeys(a for a in accounts or () if a)))


@dataclass(frozen=True)
class InvestigateOptions:
    """`kvforensics investigate`: what every stage of the run reads, and what the manifest
    records as its parameters."""

    assume_utc: bool = False
    aware_at: str | None = None  # ISO-8601 with an offset, as given
    replay_model: str | None = None
    replay_device: Device = Device.AUTO
    served_model: str | None = None
    delivery_jitter_ms: float | None = None  # as ReconstructOptions
    free_list: FreeList = FreeList.VERSION  # as ReconstructOptions
    rules: Path | None = None  # notification rules replacing or adding to the shipped ones
    follow_links: bool = False
    ray: str | None = None  # Ray cluster address, or "local"; None: the local engine
    ledger_external: str | None = None  # ledger kept outside the database: folder or URL
    ledger_load: bool = False  # load a ledger that would be read in place by default
    templates: Path | None = None  # notice templates replacing the package's (--templates)
    since: str | None = None  # the scope (--since, --until, --account), as given
    until: str | None = None
    accounts: tuple[str, ...] = ()
    # chain of custody (the manifest's custody, not its parameters): who ran it, for which
    # case (None: KVFORENSICS_EXAMINER, KVFORENSICS_CASE_REF), and the key that signs it
    examiner: str | None = None
    case_ref: str | None = None
    sign_key: Path | None = None
    command: tuple[str, ...] = field(default=(), compare=False)

    def __post_init__(self) -> None:
        device = _enum(Device, self.replay_device, "--replay-device")
        object.__setattr__(self, "replay_device", device)
        object.__setattr__(self, "rules", Path(self.rules) if self.rules is not None else None)
        key = Path(self.sign_key) if self.sign_key is not None else None
        object.__setattr__(self, "sign_key", key)
        object.__setattr__(self, "command", tuple(self.command))
        object.__setattr__(self, "accounts", tuple(self.accounts or ()))
        templates = Path(self.templates) if self.templates is not None else None
        object.__setattr__(self, "templates", templates)
        if self.delivery_jitter_ms is not None:
            check_number("--delivery-jitter-ms", self.delivery_jitter_ms)
        free_list = _enum(FreeList, self.free_list, "--sglang-free-list")
        object.__setattr__(self, "free_list", free_list)

    def parameters(self) -> dict[str, Any]:
        """What the manifest and the report record (the rules file with its SHA-256, so the
        deadlines can be traced to the exact rules)."""
        out: dict[str, Any] = {
            "assume_utc": self.assume_utc,
            "aware_at": self.aware_at,
            "replay_model": self.replay_model,
            "replay_device": self.replay_device.value,
            "served_model": self.served_model,
            "rules": str(self.rules) if self.rules else None,
            "follow_links": self.follow_links,
            "rules_sha256": sha256_file(self.rules) if self.rules else None,
        }
        extra = {
            "ray": self.ray,
            "ledger_external": self.ledger_external,
            "templates": str(self.templates) if self.templates else None,
            "ledger_load": True if self.ledger_load else None,
            "delivery_jitter_ms": self.delivery_jitter_ms,
            "sglang_free_list": (
                None if self.free_list is FreeList.VERSION else self.free_list.value
            ),
        }
        scope = self.scope()
        out = {**out, **{k: v for k, v in extra.items() if v is not None}}
        return out if scope.whole else {**out, "scope": scope.record()}

    def scope(self) -> Scope:
        return make_scope(self.since, self.until, self.accounts)

    def analysis(self) -> AnalysisOptions:
        return AnalysisOptions(ray=self.ray)

    def reconstruction(self) -> ReconstructOptions:
        return ReconstructOptions(
            replay_model=self.replay_model,
            replay_device=self.replay_device,
            delivery_jitter_ms=self.delivery_jitter_ms,
            free_list=self.free_list,
        )
