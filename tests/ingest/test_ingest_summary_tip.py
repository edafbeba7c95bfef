"""The ingest summary's tip to keep a large Parquet ledger outside the case database: given for a
loaded Parquet ledger of EXTERNAL_HINT_EVENTS events or more, never for one kept outside, one
read from other formats, a smaller one or an ingest that reloaded nothing."""

from __future__ import annotations

from dataclasses import replace

import pytest
from rich.console import Console

from forensics.case.result import FileCounts, IngestResult
from forensics.ingest.report import EXTERNAL_HINT_EVENTS, print_ingest_summary


def _result(events: int, path: str = "kv_events/decode-0.parquet") -> IngestResult:
    half = events // 2
    files = [
        FileCounts("requests.csv", "requests", "0" * 64, 10, 5, 5, 0),
        FileCounts(path, "kv_events", "1" * 64, 10, half + 7, half, 7),
        FileCounts(path.replace("decode-0", "decode-1"), "kv_events", "2" * 64, 10, half, half, 0),
    ]
    return IngestResult("case", files)


def _printed(result: IngestResult) -> str:
    console = Console(record=True, width=400)
    print_ingest_summary(console, result)
    return console.export_text()


def test_a_large_loaded_parquet_ledger_gets_the_tip_with_its_loaded_events() -> None:
    text = _printed(_result(EXTERNAL_HINT_EVENTS))
    assert f"tip: {EXTERNAL_HINT_EVENTS:,} ledger events were loaded" in text
    assert "--ledger-external" in text


@pytest.mark.parametrize(
    "result",
    [
        _result(EXTERNAL_HINT_EVENTS - 2),  # one event short (quarantined rows do not count)
        replace(_result(EXTERNAL_HINT_EVENTS), ledger_external=True),
        replace(_result(EXTERNAL_HINT_EVENTS), unchanged=True),
        _result(EXTERNAL_HINT_EVENTS, "kv_events/decode-0.jsonl"),
    ],
    ids=["smaller", "kept outside", "unchanged", "jsonl"],
)
def test_no_tip_where_it_does_not_apply(result: IngestResult) -> None:
    assert "tip:" not in _printed(result)


def test_the_json_says_whether_the_ledger_is_kept_outside() -> None:
    assert _result(10).to_json()["ledger_external"] is False
    assert replace(_result(10), ledger_external=True).to_json()["ledger_external"] is True
