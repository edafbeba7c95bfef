"""report.html: figures against a naive oracle, self-containment, sections, stage notes."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from support.report_case import _exposure, add_rows, build_case, every_schema, seq_tables, t
from support.report_oracle import headline_from_exposures, parse

from forensics.report.casedb import open_case
from forensics.report.stage import write_all


def _report(tmp_path: Path, tables: dict, schemas: tuple[str, ...] | None = None) -> str:
    kwargs = {"schemas": schemas} if schemas else {}
    db = build_case(tmp_path / "case.duckdb", tables, **kwargs)
    con = open_case(db)
    write_all(con, tmp_path / "out", case_label="semantics-seq")
    con.close()
    return (tmp_path / "out" / "report.html").read_text(encoding="utf-8")


def _richer_tables() -> dict:
    """semantics-seq plus a same-account exposure (H <- A, both acct-1) and an overlapping run of
    another kind for B <- A (slots 4-9 while 2-7 is already exposed: 2 new slots, not 6)."""
    tables = seq_tables()
    add_rows(
        tables,
        "exposures",
        [
            _exposure(
                "H",
                "acct-1",
                "A",
                "acct-1",
                0,
                3,
                (0, 2),
                "2026-08-27T10:00:07.0004Z",
                "2026-08-27T10:00:00.0001Z",
                "stale",
            ),
            _exposure(
                "B",
                "acct-2",
                "A",
                "acct-1",
                4,
                6,
                (4, 9),
                "2026-08-27T10:00:01.0002Z",
                "2026-08-27T10:00:00.0001Z",
                "overwritten",
            ),
        ],
    )
    return tables


@pytest.fixture(scope="module")
def richer(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict]:
    tables = _richer_tables()
    return _report(tmp_path_factory.mktemp("rich"), tables), tables


def test_headline_figures_equal_the_naive_oracle(richer: tuple[str, dict]) -> None:
    html, tables = richer
    expected = headline_from_exposures(tables["exposures"])
    page = parse(html)
    for name, value in expected.items():
        assert int(page.figures[name]) == value, name
        assert page.shown[name].strip().replace(",", "") == str(value), name
    figures = page.figures
    # and by hand: 6 + 2 (B<-A, the overlap counted once) + 4 + 2 + 2
    assert int(figures["cross_tokens"]) == 16
    assert int(figures["same_account_tokens"]) == 3


def test_self_contained_with_a_strict_csp(richer: tuple[str, dict]) -> None:
    html, _ = richer
    page = parse(html)
    csp = [
        a.get("content")
        for t, a in page.tags
        if t == "meta" and (a.get("http-equiv") or "").lower() == "content-security-policy"
    ]
    assert csp and "default-src 'none'" in csp[0]
    assert not [
        t
        for t, _ in page.tags
        if t in ("script", "img", "link", "iframe", "object", "embed", "image")
    ]
    for _, attrs in page.tags:
        for key, value in attrs.items():
            assert not key.startswith("on")
            if key in ("src", "href", "xlink:href"):
                # in-page anchors, and the drill-down pages written beside the report
                local = re.fullmatch(r"explain/[A-Za-z0-9_-]+\.html", value or "")
                assert (value or "").startswith("#") or (key == "href" and local), (key, value)
    assert not re.search(r"url\(\s*['\"]?(?!#)", html)
    assert "@import" not in html
    assert html.count("<svg") >= 3  # timeline, nodes, time to first token


LEVELS = ("confirmed", "ledger", "reconstructed", "possible")


class _Tags(HTMLParser):
    """Each <span class="tag ..."> with its classes and text."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[tuple[set[str], str]] = []
        self._open: set[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        classes = set((dict(attrs).get("class") or "").split())
        if tag == "span" and "tag" in classes:
            self._open = classes
            self.found.append((classes, ""))

    def handle_data(self, data: str) -> None:
        if self._open is not None:
            classes, text = self.found[-1]
            self.found[-1] = (classes, text + data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "span":
            self._open = None


def test_one_colour_per_confidence_and_no_break_all(richer: tuple[str, dict]) -> None:
    """Every badge that shows a confidence carries the one class of that confidence (in the
    lists, the exposures, the method and replay alike), each class has one colour rule, and no
    rule breaks words anywhere (ids wrap only where they do not fit)."""
    html, _ = richer
    tags = _Tags()
    tags.feed(html)
    shown = [(c, text.split(" (")[0].strip()) for c, text in tags.found]
    badges = [(c, level) for c, level in shown if level in LEVELS]
    assert {level for _, level in badges} >= {"confirmed", "ledger"}
    for classes, level in badges:
        assert {c for c in classes if c.startswith("conf-")} == {f"conf-{level}"}, classes
        assert not classes & {"good", "bad"}, classes
    for level in LEVELS:
        assert len(re.findall(rf"\.conf-{level} {{ background", html)) == 1, level
    assert "break-all" not in html


def test_sections_present(richer: tuple[str, dict]) -> None:
    html, _ = richer
    for section in (
        "summary",
        "notifications",
        "timeline",
        "nodes",
        "root-cause",
        "exposures",
        "method",
        "quarantine",
        "manifest",
    ):
        assert f'<section id="{section}">' in html
    for level in ("confirmed", "ledger", "possible"):
        assert f">{level}</span>" in html
    assert "@media print" in html


def test_pool_shorter_than_context_is_flagged(richer: tuple[str, dict]) -> None:
    html, _ = richer
    # nodes.csv: n1 has 32 pool slots for a 64-token context: 50 %
    assert '<span class="tag bad">50 %</span>' in html
    assert "<strong>n1</strong> (32 of 64)" in html


def test_overlong_requests_answered_200_are_listed(tmp_path: Path) -> None:
    tables = seq_tables()
    for row in tables["requests"]:
        if row["request_id"] == "C":
            row["prompt_tokens"] = 40  # n1 holds 32 slots
    html = _report(tmp_path, tables)
    section = html[html.index('id="root-cause"') : html.index('id="exposures"')]
    assert "1 request(s) were answered 200" in section
    assert '<td class="mono">C</td>' in section


def test_missing_stages_are_named(richer: tuple[str, dict]) -> None:
    html, _ = richer
    assert "The replay stage has not run on this case (missing: " in html
    assert "replay_results, replay_runs); no exposure is marked confirmed." in html
    assert "engine log reading stage has not run" not in html  # its tables exist, empty
    assert "No engine log evidence in the case." in html


def test_quarantine_and_inputs_shown(tmp_path: Path) -> None:
    tables = seq_tables()
    add_rows(
        tables,
        "quarantine",
        [
            {
                "table_name": "kv_events",
                "file": "kv_events.csv",
                "row": 3,
                "column": "ts",
                "value": "yesterday",
                "reason": "bad timestamp",
            },
            {
                "table_name": "kv_events",
                "file": "kv_events.csv",
                "row": 9,
                "column": "ts",
                "value": "soon",
                "reason": "bad timestamp",
            },
        ],
    )
    add_rows(
        tables,
        "input_files",
        [
            {
                "path": "kv_events.csv",
                "table_name": "kv_events",
                "sha256": "ab" * 32,
                "bytes": 1234,
                "rows_read": 32,
                "rows_loaded": 30,
                "rows_quarantined": 2,
            }
        ],
    )
    html = _report(tmp_path, tables)
    section = html[html.index('id="quarantine"') : html.index('id="manifest"')]
    assert "bad timestamp" in section and '<td class="n">2</td>' in section
    assert "ab" * 32 in html[html.index('id="manifest"') :]


def test_later_stages_shown_when_present(tmp_path: Path) -> None:
    """Replay verdicts, engine log evidence and screening appear in the report and timeline."""
    tables = seq_tables()
    add_rows(
        tables,
        "replay_results",
        [
            {
                "request_id": "B",
                "verdict": "confirmed",
                "reason": "contaminated replay matches",
                "basis": "evidence",
                "evidence_bits": 23.44,
                "delivered_sha256": "aa",
                "contaminated_sha256": "aa",
                "clean_sha256": "bb",
                "tokens": 12,
                "seconds": 0.5,
                "tokens_per_s": 24.0,
                "device": "cpu",
                "model": "tiny",
            },
            {
                "request_id": "H",
                "verdict": "not-confirmed",
                "reason": "clean replay matches too",
                "delivered_sha256": "cc",
                "contaminated_sha256": "cc",
                "clean_sha256": "cc",
                "tokens": 8,
                "seconds": 0.4,
                "tokens_per_s": 20.0,
                "device": "cpu",
                "model": "tiny",
            },
        ],
    )
    add_rows(
        tables,
        "engine_evidence",
        [
            {
                "node": "n1",
                "ts": t("2026-08-27T09:00:01Z"),
                "kind": "pool-smaller-than-context",
                "request_id": None,
                "value": 32.0,
                "max_value": 64.0,
                "message": "max_total_num_tokens=32, context_len=64",
                "src_file": "n1.log",
                "src_line": 12,
            }
        ],
    )
    add_rows(
        tables,
        "screening",
        [
            {
                "request_id": "C",
                "account_id": "acct-3",
                "prefill_node": None,
                "decode_node": "n1",
                "reasons": ["fast-ttft"],
                "ttft_ms": 0.2,
                "expected_ttft_ms": 50.0,
                "ledger_covered": False,
            }
        ],
    )
    db = build_case(tmp_path / "case.duckdb", tables, schemas=every_schema())
    con = open_case(db)
    result = write_all(con, tmp_path / "out")
    con.close()
    assert result.missing_tables == []
    html = (tmp_path / "out" / "report.html").read_text()
    page = parse(html)
    assert page.figures["confirmed_requests"] == "1"  # B, by its replay verdict
    assert page.figures["possible_receivers"] == "1"  # C: flagged, no ledger covers it
    assert "has not run" not in html
    section = html[html.index('id="exposures"') : html.index('id="method"')]
    assert (
        '<span class="tag conf-confirmed">confirmed (evidence)</span></td><td class="n">+23.4</td>'
        in section
    )
    assert "clean replay matches too" in section
    assert "each bit doubles the odds" in section
    assert "0.5" not in section and "24.0" not in section  # wall-clock figures stay out
    assert "max_total_num_tokens=32, context_len=64" in html
    assert "fast-ttft" in html
    timeline = (tmp_path / "out" / "timeline.csv").read_text()
    assert "pool-smaller-than-context" in timeline and "screened as a possible receiver" in timeline


@pytest.mark.parametrize(
    ("span_s", "unit"),
    [
        (0, "second"),
        (90, "second"),
        (121, "minute"),
        (3600, "minute"),
        (3 * 3600, "hour"),
        (2 * 86400, "hour"),
        (4 * 86400, "day"),
        (14 * 86400, "day"),
        (90 * 86400, "week"),
    ],
)
def test_timeline_bucket_follows_the_span(span_s: int, unit: str) -> None:
    """Chosen so the chart has at most about a hundred bars: seconds up to 2 minutes, minutes
    up to 2 hours, hours up to 3 days, days up to 60 days, then weeks."""
    from datetime import datetime, timedelta

    from forensics.report.render import _bucket_unit

    first = datetime(2026, 8, 27, 10, 0, 0)

    class Span:
        first_exposure_at = first
        last_exposure_at = first + timedelta(seconds=span_s)

    assert _bucket_unit(Span()) == unit  # type: ignore[arg-type]


def _rebuilt_pair(receiver: str, leaker: str, account: str, ways: list[str]) -> dict:
    return {
        "receiver_request_id": receiver,
        "receiver_account_id": "acct-r",
        "leaker_request_id": leaker,
        "leaker_account_id": account,
        "node": "decode-0",
        "tokens": 16,
        "support": 1.0,
        "read_at": t("2026-08-27T10:00:05Z"),
        "cross_account": True,
        "free_lists": ways,
    }


def test_what_each_free_list_names_alone_is_shown_where_several_were_followed(tmp_path):
    """Leaking accounts counted by hand: staged names acct-1 and acct-2, front acct-2 and
    acct-3, every way all three; a replay-cleared pair counts under no way."""
    tables = add_rows(
        seq_tables(),
        "reconstructed_exposures",
        [
            _rebuilt_pair("S", "L1", "acct-1", ["staged"]),
            _rebuilt_pair("S", "L2", "acct-2", ["front", "staged"]),
            _rebuilt_pair("S", "L3", "acct-3", ["front"]),
            {**_rebuilt_pair("S", "L4", "acct-4", ["front"]), "verdict": "cleared"},
        ],
    )
    add_rows(tables, "reconstructed_nodes", [_rebuilt_node()])
    text = re.sub(r"<[^>]+>", " ", _report(tmp_path / "several", tables))
    text = re.sub(r"\s+", " ", text)
    assert "was followed, the lists hold the reads of each (3 leaking accounts" in text
    assert "the most recently freed handed out first 2 " in text
    assert "(a disaggregated node of a recent release) 2 " in text
    one = add_rows(
        add_rows(seq_tables(), "reconstructed_nodes", [_rebuilt_node()]),
        "reconstructed_exposures",
        [_rebuilt_pair("S", "L1", "acct-1", ["staged"])],
    )
    assert "freed pages back</h3>" not in _report(tmp_path / "one", one)  # nothing to narrow


def _rebuilt_node() -> dict:
    return {
        "node": "decode-0",
        "role": "decode",
        "allocator": "sglang",
        "page_size": 16,
        "pool_slots": 1440,
        "requests": 4,
        "stubs": 1,
        "ambiguous_groups": 0,
        "orders": 1,
        "deferred": 0,
    }


def test_accounts_only_the_ways_the_release_does_not_build_name_are_shown_not_listed(tmp_path):
    """--sglang-free-list version: the lists take the staged way the nodes' release builds;
    the account only the front way's runs name (kept apart) is in the report's own table, with
    its hostile id escaped, and on no notification list. Counted by hand: one such account,
    two of its requests, read by one receiving request."""
    hostile = "<b>acct-3</b>"
    apart = [_rebuilt_pair("S", leaker, hostile, ["front"]) for leaker in "XY"]
    tables = add_rows(
        seq_tables(), "reconstructed_exposures", [_rebuilt_pair("S", "L1", "acct-1", ["staged"])]
    )
    add_rows(tables, "reconstructed_other_ways", apart)
    add_rows(tables, "reconstructed_nodes", [{**_rebuilt_node(), "listed_free_list": "staged"}])
    html = _report(tmp_path, tables)
    assert hostile not in html and "&lt;b&gt;acct-3&lt;/b&gt;" in html
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))
    assert "the lists take the way the release named for each node builds: staged," in text
    assert "name 1 leaking account(s) that are not on the leaking list" in text
    assert "&lt;b&gt;acct-3&lt;/b&gt; 2 1 decode-0 16" in text
    assert "1 more account(s) would be possible leakers were those nodes not built" in text
    listed = (tmp_path / "out" / "notifications" / "leaking_accounts.csv").read_text()
    assert "acct-3" not in listed
    # kept apart alone (a scope holding only such an account): still named, with its table
    alone = add_rows(seq_tables(), "reconstructed_other_ways", apart)
    add_rows(alone, "reconstructed_nodes", [{**_rebuilt_node(), "listed_free_list": "staged"}])
    html = _report(tmp_path / "alone", alone)
    assert "&lt;b&gt;acct-3&lt;/b&gt;" in html and "Leaking account, not listed" in html
