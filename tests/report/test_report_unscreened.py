"""The report's summary says where a stub could not be looked for, never reading as an
all-clear: with a pool size but no cached tokens, no time model and no engine counters, the
stub of a prompt that fits the pool could not be seen (the analysis' own count, checked
against the rows it was given: 3 requests on a node with a known pool)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from support.analysis_case import insert, new_case, timed_request

from forensics.analysis.stage import analyze
from forensics.report.stage import write_all


def _summary(tmp_path: Path, cached: bool, engine: str | None = "vllm") -> str:
    con = new_case()
    node = {"node": "p1", "role": "prefill", "pool_slots": 100_000, "engine": engine}
    insert(con, "nodes", [node])
    extra = {"cached_tokens": 0} if cached else {}
    rows = [timed_request(f"R{i}", "acct-1", 100 + i, 300, 0.03, **extra) for i in range(3)]
    insert(con, "requests", rows)
    analyze(con)
    write_all(con, tmp_path / "out")
    html = (tmp_path / "out" / "report.html").read_text(encoding="utf-8")
    return html


def test_a_fitting_stub_that_could_not_be_looked_for_is_said(tmp_path: Path) -> None:
    html = _summary(tmp_path, cached=False)
    found = re.search(r'data-evidence="unscreened-fitting">For <strong>(\d+)</strong>', html)
    assert found and found.group(1) == "3"
    assert 'data-evidence="unscreened"' not in html  # over-pool could look at them


def test_with_cached_tokens_nothing_is_said(tmp_path: Path) -> None:
    assert 'data-evidence="unscreened-fitting"' not in _summary(tmp_path, cached=True)


def test_cached_tokens_do_not_count_as_looking_where_the_engine_does_not_count_a_stub_cached(
    tmp_path: Path,
) -> None:
    """SGLang's stub is a prompt cut to one token, and its cached tokens look like anyone's:
    on an SGLang node, or one whose engine is not known, the responses' cached tokens do not
    count as looking for the stub of a prompt that fits, and the summary says so."""
    for engine in ("sglang", None):
        html = _summary(tmp_path / str(engine), cached=True, engine=engine)
        found = re.search(r'data-evidence="unscreened-fitting">For <strong>(\d+)</strong>', html)
        assert found and found.group(1) == "3", engine


def _unplaced(tmp_path: Path, nodes: list[dict[str, Any]]) -> str:
    """The report of an earlier request and a stub (served from a cache more than anything
    before it held), neither row naming a node, beside `nodes`."""
    con = new_case()
    insert(con, "nodes", nodes)
    unplaced = {"prefill_node": None, "decode_node": None}
    rows = [
        timed_request("A1", "acct-1", 100, 300, 0.03, cached_tokens=0, **unplaced),
        timed_request("S1", "acct-2", 110, 5000, 0.002, cached_tokens=4999, **unplaced),
    ]
    insert(con, "requests", rows)
    analyze(con)
    write_all(con, tmp_path / "out")
    return (tmp_path / "out" / "report.html").read_text(encoding="utf-8")


def test_a_suspect_whose_node_is_not_logged_is_said(tmp_path: Path) -> None:
    """A stub (served from a cache more than anything before it held) whose row names no node:
    the summary says its possible sources could not be narrowed to one node."""
    html = _unplaced(tmp_path, [])
    found = re.search(r'data-evidence="nodeless">For <strong>(\d+)</strong>', html)
    assert found and found.group(1) == "1"
    assert 'data-evidence="nodeless"' not in _summary(tmp_path / "placed", cached=True)


def test_requests_taken_as_the_only_nodes_are_said(tmp_path: Path) -> None:
    """The same rows beside a nodes file of one engine: they are taken as its requests, and
    the summary says for how many and what would withdraw it, and no longer that the suspect
    could not be placed."""
    html = _unplaced(tmp_path, [{"node": "vllm-0", "role": "unified", "pool_slots": 1000}])
    found = re.search(r'data-evidence="sole-node">For <strong>(\d+)</strong>', html)
    assert found and found.group(1) == "2"
    assert "list every one in the nodes file" in html
    assert 'data-evidence="nodeless"' not in html
