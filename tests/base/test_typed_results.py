"""Verdicts, confidence levels, evidence levels and exposure kinds are StrEnums defined once.

The SQL in queries/ and the templates spell the values themselves (the strings in the case
database do not change); these tests hold the two sides together: every value the schema
documents or a query produces is a member, every member is produced, and no module of the
package spells a value as a bare string outside its enum's module."""

from __future__ import annotations

import ast
import csv
import io
import json
import re
from enum import StrEnum
from pathlib import Path

import duckdb
import jinja2
import pytest

import forensics
from forensics.analysis.codes import EXPOSURE_KINDS, ExposureKind
from forensics.analysis.evidence import GRADES, Confidence, EvidenceLevel
from forensics.notify.notices import CONFIDENCE_WORDS
from forensics.replay.verdicts import Basis, PairVerdict, Verdict
from forensics.report.render import CONFIDENCE_MEANINGS
from forensics.report.stage import CONFIDENCE_ORDER
from forensics.simulate.truth import KINDS

PACKAGE = Path(forensics.__file__).parent
REPO = PACKAGE.parent
QUERIES = REPO / "queries"
TEMPLATES = REPO / "templates"

ENUMS: tuple[type[StrEnum], ...] = (
    ExposureKind,
    Confidence,
    EvidenceLevel,
    Verdict,
    Basis,
    PairVerdict,
)
ENUM_MODULES = {"analysis/codes.py", "analysis/evidence.py", "replay/verdicts.py"}

# (module under forensics/, value): why the string stays. Each entry names a different thing
# that happens to be spelled like a value: a table, a query, a section, a summary key.
ALLOWED = {
    ("cli/explain_cmd.py", "evidence"): "the column node_evidence.evidence, not a basis",
    ("ledger/store.py", "ledger"): "the progress bar's name for loading the ledger",
    ("notify/scope.py", "screening"): "the screening table",
    ("replay/stage.py", "screening"): "the screening table",
    ("report/render.py", "screening"): "the screening table and the stage that writes it",
    ("report/explain.py", "screening"): "the explain/screening query and its section",
    ("report/explain.py", "possible"): "the explain/possible query and its section",
    ("report/explain.py", "reconstructed"): "the explain/reconstructed query, a story event kind",
    ("report/explain.py", "cleared"): "the explain/cleared query (cleared_findings)",
    ("report/explain.py", "ledger"): "a story event kind (a node's KV ledger events)",
    ("reconstruct/headline.py", "confirmed"): "a key of reconstruct's summary (a count)",
    ("reconstruct/headline.py", "cleared"): "a key of reconstruct's summary (a count)",
}


def _values() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for enum in ENUMS:
        for member in enum:
            out.setdefault(member.value, []).append(enum.__name__)
    return out


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def spelled_values(package: Path) -> set[tuple[str, str, int]]:
    """(module, value, line) for every string constant of the package equal to an enum value,
    docstrings left out."""
    values = _values()
    found = set()
    for path in sorted(package.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docs = _docstrings(tree)
        module = path.relative_to(package).as_posix()
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and node.value in values
                and id(node) not in docs
            ):
                found.add((module, node.value, node.lineno))
    return found


def test_no_module_spells_a_value_outside_its_enum():
    stray = sorted(
        f"{module}:{line}: {value!r} (use {' or '.join(_values()[value])})"
        for module, value, line in spelled_values(PACKAGE)
        if module not in ENUM_MODULES and (module, value) not in ALLOWED
    )
    assert not stray, "values spelled outside their enum:\n" + "\n".join(stray)


def test_the_scan_finds_a_bare_value(tmp_path):
    """The scan itself: a module comparing with a bare verdict is found, its docstring not."""
    (tmp_path / "stage.py").write_text(
        '"""Counts what is confirmed."""\n\ndef ok(v):\n    return v == "not-reproduced"\n'
    )
    assert spelled_values(tmp_path) == {("stage.py", "not-reproduced", 4)}


def test_allow_list_entries_are_still_needed():
    spelled = {(module, value) for module, value, _ in spelled_values(PACKAGE)}
    assert not set(ALLOWED) - spelled, "allow-list entries no module needs any more"


def _schema_choices(table_sql: str, table: str, column: str) -> set[str]:
    """The values a schema comment lists for a column (`-- a | b | c`)."""
    body = table_sql.split(f"CREATE TABLE IF NOT EXISTS {table} (", 1)[1].split(");", 1)[0]
    line = next(x for x in body.splitlines() if re.match(rf"\s*{column}\s", x))
    comment = line.split("--", 1)[1]
    comment = comment.split(":", 1)[1] if ":" in comment.split("|")[0] else comment
    comment = comment.split(";", 1)[0].split("(", 1)[0]
    return {part.strip() for part in comment.split("|")}


@pytest.mark.parametrize(
    ("schema", "table", "column", "enum"),
    [
        ("analysis", "exposures", "kind", ExposureKind),
        ("analysis", "affected_requests", "confidence", Confidence),
        ("analysis", "node_evidence", "evidence", EvidenceLevel),
        ("replay", "replay_results", "verdict", Verdict),
        ("reconstruct", "reconstructed_exposures", "verdict", PairVerdict),
    ],
)
def test_schema_documents_exactly_the_members(schema, table, column, enum):
    text = (QUERIES / "schema" / f"{schema}.sql").read_text(encoding="utf-8")
    assert _schema_choices(text, table, column) == {m.value for m in enum}


def test_schema_documents_each_basis():
    text = (QUERIES / "schema" / "replay.sql").read_text(encoding="utf-8")
    comment = text.split("    basis ", 1)[1].split("    reason ", 1)[0]
    documented = set(re.findall(r"(?::|\|) (\w+) \(", comment))
    assert documented == {m.value for m in Basis}


def case_results(text: str, column: str) -> set[str]:
    """The string literals (THEN / ELSE 'x') of the CASE expression that makes `column`."""
    end = re.search(rf"\bEND AS {column}\b", text)
    assert end is not None, column
    depth, pos = 0, end.start()
    for word in reversed(list(re.finditer(r"\b(CASE|END)\b", text[: end.end()]))):
        depth += 1 if word.group(1) == "END" else -1
        if depth == 0:
            pos = word.start()
            break
    return set(re.findall(r"\b(?:THEN|ELSE)\s+'([^']+)'", text[pos : end.start()]))


@pytest.mark.parametrize(
    ("query", "column", "enum"),
    [
        ("analysis/node_evidence", "evidence", EvidenceLevel),
        ("notify/lists", "confidence", Confidence),
        ("analysis/affected_accounts", "confidence", Confidence),
        ("bench/naive_per_slot", "kind", ExposureKind),
    ],
)
def test_queries_produce_exactly_the_members(query, column, enum):
    text = (QUERIES / f"{query}.sql").read_text(encoding="utf-8")
    assert case_results(text, column) == {m.value for m in enum}


def test_case_results_reads_only_the_column_s_case():
    text = (
        "CASE WHEN p THEN 'a' END AS x, "
        "CASE CASE v WHEN 'k' THEN 1 END WHEN 1 THEN 'b' ELSE 'c' END AS y, 'd' AS z"
    )
    assert case_results(text, "y") == {"b", "c"}


def test_every_confidence_has_its_style_and_its_words():
    style = (TEMPLATES / "_style.html").read_text(encoding="utf-8")
    for level in Confidence:
        assert f".conf-{level.value}" in style, level
    assert list(CONFIDENCE_WORDS) == list(Confidence)
    assert [level for level, _ in CONFIDENCE_MEANINGS] == list(Confidence)
    assert sorted(CONFIDENCE_ORDER, key=CONFIDENCE_ORDER.__getitem__) == list(Confidence)


def test_templates_compare_only_with_verdicts():
    compared = set()
    for path in TEMPLATES.rglob("*.html"):
        compared |= set(re.findall(r"verdict == '([^']+)'", path.read_text(encoding="utf-8")))
    assert compared and compared <= {v.value for v in Verdict}


def test_one_spelling_of_a_confirmation():
    """The SQL raises a finding to confidence 'confirmed' where a verdict is 'confirmed'."""
    assert Verdict.CONFIRMED == PairVerdict.CONFIRMED == Confidence.CONFIRMED == "confirmed"


def test_grades_follow_the_evidence_levels():
    assert list(GRADES) == list(EvidenceLevel)


def test_exposure_kind_codes_keep_their_order_and_plain_strings():
    # the compiled sweep's kind codes 0, 1, 2 index this tuple; the SQL binds it as a list
    assert EXPOSURE_KINDS == ("stale", "overwritten", "prefix-mismatch")
    assert all(type(k) is str for k in EXPOSURE_KINDS)
    assert set(KINDS) == set(EXPOSURE_KINDS) and all(type(k) is str for k in KINDS)


@pytest.mark.parametrize("member", [m for enum in ENUMS for m in enum])
def test_a_member_prints_its_value(member):
    value = member.value
    assert str(member) == f"{member}" == value
    assert json.dumps({member: [member]}) == json.dumps({value: [value]})
    template = jinja2.Environment(autoescape=True).from_string(
        "{{ v }} conf-{{ v }} {{ 'x-' ~ v }}"
    )
    assert template.render(v=member) == f"{value} conf-{value} x-{value}"
    out = io.StringIO()
    csv.writer(out).writerow([member])
    assert out.getvalue() == f"{value}\r\n"
    bound = duckdb.connect().execute("SELECT $v, typeof($v)", {"v": member}).fetchone()
    assert bound == (value, "VARCHAR")
