"""What a recognised log message looks like, and how its values are read.

A `Spec` has three parts: `head` says "this is that message"; `full` matches the whole message
(no match means the line was cut: counted as truncated); `partial` reads single values from a
cut line, each regex ending at the value's own delimiter, so a value cut in the middle is never
taken."""

from __future__ import annotations

import re
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Spec:
    kind: str  # e.g. "sglang.max-total", "evidence.exceeds-max-tokens"
    engine: str  # sglang | vllm
    head: re.Pattern[str]
    full: re.Pattern[str]
    partial: tuple[re.Pattern[str], ...] = ()
    extras: tuple[re.Pattern[str], ...] = ()  # optional values searched in every match
    starts_run: bool = False  # a start-up banner: a new engine start begins here
    needle: str = ""  # a literal every matching line contains (a fast pre-check)


@dataclass(frozen=True)
class Match:
    spec: Spec
    complete: bool
    values: dict[str, str] = field(default_factory=dict)


def _groups(pattern: re.Pattern[str], body: str) -> dict[str, str]:
    return _values(pattern.search(body))


def _values(found: re.Match[str] | None) -> dict[str, str]:
    if not found:
        return {}
    return {k: v for k, v in found.groupdict().items() if v is not None}


def match_spec(spec: Spec, body: str) -> Match | None:
    """Match one spec against a record body that holds its needle: None, a complete match or a
    truncated one."""
    if not spec.head.search(body):
        return None
    found = spec.full.search(body)  # searched once: its values, and whether it is whole
    values = _values(found)
    complete = found is not None
    if not complete:
        for pattern in spec.partial:
            values.update(_groups(pattern, body))
    for pattern in spec.extras:
        for key, value in _groups(pattern, body).items():
            values.setdefault(key, value)
    return Match(spec, complete, values)


def match_all(specs: tuple[Spec, ...], body: str) -> list[Match]:
    found = [match_spec(s, body) for s in specs if s.needle in body]
    return [m for m in found if m is not None]


def to_int(text: str) -> int | None:
    """Digits with thousands separators, 0x hex, or a decimal rounded to the nearest integer."""
    text = text.strip().replace(",", "").replace("_", "")
    try:
        if text.lower().startswith("0x"):
            return int(text, 16)
        if "." in text:
            return round(float(text))
        return int(text)
    except ValueError:
        return None


def rx(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)
