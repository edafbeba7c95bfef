"""Naive oracles for the report's headline figures: exposures exploded slot by slot in Python,
and an HTML parser that lists elements and the figures marked with data-figure."""

from __future__ import annotations

from html.parser import HTMLParser
from typing import Any


def headline_from_exposures(exposures: list[dict[str, Any]]) -> dict[str, int]:
    cross = [e for e in exposures if e["cross_account"]]
    same = [e for e in exposures if e["cross_account"] is False]

    def tokens(runs: list[dict[str, Any]]) -> int:
        return len(
            {
                (e["receiver_request_id"], e["node"], s, e["leaker_request_id"])
                for e in runs
                for s in range(e["slot_start"], e["slot_start"] + e["slot_count"])
            }
        )

    return {
        "cross_runs": len(cross),
        "cross_tokens": tokens(cross),
        "receiving_requests": len({e["receiver_request_id"] for e in cross}),
        "receiving_accounts": len({e["receiver_account_id"] for e in cross}),
        "leaking_requests": len({e["leaker_request_id"] for e in cross}),
        "leaking_accounts": len({e["leaker_account_id"] for e in cross}),
        "same_account_runs": len(same),
        "same_account_tokens": tokens(same),
        "same_account_receiving_requests": len({e["receiver_request_id"] for e in same}),
        "same_account_leaking_requests": len({e["leaker_request_id"] for e in same}),
        "confirmed_requests": len(
            {e["receiver_request_id"] for e in cross if e.get("confidence") == "confirmed"}
        ),
    }


VOID = {"meta", "link", "br", "hr", "img", "input", "col", "area", "base", "wbr", "source"}


class Elements(HTMLParser):
    """Every start tag with its attributes; for elements carrying data-figure, their data-value
    (`figures`) and their displayed text (`shown`)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.figures: dict[str, str] = {}
        self.shown: dict[str, str] = {}
        self.text: list[str] = []
        self._open: list[str | None] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        self.tags.append((tag, attributes))
        if attributes.get("data-figure"):
            self.figures[str(attributes["data-figure"])] = str(attributes.get("data-value"))
        if tag not in VOID:
            self._open.append(attributes.get("data-figure"))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_endtag(self, tag: str) -> None:
        if tag not in VOID and self._open:
            self._open.pop()

    def handle_data(self, data: str) -> None:
        self.text.append(data)
        if self._open and self._open[-1]:
            name = self._open[-1]
            self.shown[name] = self.shown.get(name, "") + data


def parse(html: str) -> Elements:
    parser = Elements()
    parser.feed(html)
    parser.close()
    return parser
