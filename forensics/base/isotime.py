"""The one reader of ISO-8601 times given by people or written by the project: option values
(--aware-at, --fixed-at), the times stored in case databases, collectors' log-line prefixes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from forensics.errors import UsageError


def parse_iso(text: str) -> datetime:
    """ISO-8601 text as a datetime: a trailing Z (or z) is UTC; without an offset the result
    is naive. ValueError when the text is not an ISO-8601 time."""
    value = text.strip()
    if value[-1:] in ("Z", "z"):
        value = value[:-1] + "+00:00"
    return datetime.fromisoformat(value)


def option_time(text: str, option: str, example: str) -> datetime:
    """The value of a time option: ISO-8601 with a UTC offset (or Z), as an aware datetime.
    A UsageError names the option and shows `example` when the text is not such a time."""
    try:
        value = parse_iso(text)
        value.astimezone(UTC)  # a time near year 1 or 9999 whose offset leaves the range
    except (ValueError, OverflowError) as exc:
        raise UsageError(
            f"{option} '{text}' is not an ISO-8601 time; write e.g. {example}"
        ) from exc
    if value.tzinfo is None:
        raise UsageError(
            f"{option} '{text}' has no UTC offset; add one, e.g. {text}Z or {text}+02:00"
        )
    return value


def scope_time(text: str, option: str) -> datetime:
    """A time as ingest reads one: integer microseconds since the epoch, or ISO-8601 with a UTC
    offset (or Z); an aware datetime. A UsageError names the option otherwise."""
    value = text.strip()
    if value.lstrip("-").isdigit():
        try:
            return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=int(value))
        except OverflowError as exc:
            raise UsageError(f"{option} '{text}' is out of range as epoch microseconds") from exc
    return option_time(value, option, "2026-09-04T00:00:00Z or 1788480000000000")


def iso_utc(value: datetime | None) -> str:
    """A datetime as ISO-8601 UTC with microseconds and a Z ('' for None); naive values are
    taken as UTC."""
    if value is None:
        return ""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    text = value.astimezone(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")
    return text
