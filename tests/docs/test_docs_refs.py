"""Every reference to the design document points into the repository, at a section that exists."""

from __future__ import annotations

import re

from support.paths import REPO

DESIGN = REPO / "docs" / "DESIGN.md"
THIS = "tests/docs/test_docs_refs.py"
SCANNED = ("forensics", "queries", "templates", "tests", "benchmarks", "scripts", "docs")
SUFFIXES = {".py", ".sql", ".md", ".html", ".sh", ".toml"}
REFERENCE = re.compile(r"DESIGN(?:\.md)?\s*§\s*(\d+[a-z]?)")


def _texts() -> dict[str, str]:
    files = [REPO / "README.md", REPO / "CHANGELOG.md", REPO / "pyproject.toml"]
    for folder in SCANNED:
        files += [p for p in (REPO / folder).rglob("*") if p.suffix in SUFFIXES and p.is_file()]
    return {str(p.relative_to(REPO)): p.read_text(encoding="utf-8") for p in files if p.exists()}


def _sections() -> set[str]:
    heads = re.findall(r"^## (\d+[a-z]?)\. ", DESIGN.read_text(encoding="utf-8"), re.MULTILINE)
    return set(heads)


def test_design_document_has_its_sections():
    assert {"1", "2", "3", "4", "5", "6", "7", "8"} <= _sections()


def test_every_section_reference_exists():
    sections = _sections()
    missing = [
        f"{name}: §{ref}"
        for name, text in _texts().items()
        for ref in REFERENCE.findall(text)
        if ref not in sections
    ]
    assert not missing, missing


def test_no_reference_points_outside_the_repository():
    outside = re.compile(r"(\.\./shared|shared/(?:DESIGN|ENGINES|STYLE|examples|seeds))")
    hits = [name for name, text in _texts().items() if outside.search(text)]
    assert not [h for h in hits if h != THIS], hits


def test_design_references_name_the_file():
    """A bare 'DESIGN §N' would not say where the document is; every one names DESIGN.md."""
    bare = re.compile(r"(?<![./\w])DESIGN\s*§")
    hits = [name for name, text in _texts().items() if bare.search(text)]
    assert not [h for h in hits if h != THIS], hits


def test_every_named_markdown_file_is_in_the_repository():
    """A document named anywhere (`docs/engines.md`, `ENGINES.md`, …) is one the repository
    holds. Output files (notices are `.md` too) are named in lower case outside docs/."""
    held = {p.name for p in REPO.rglob("*.md") if ".venv" not in p.parts and ".git" not in p.parts}
    named = re.compile(r"(?<![\w.-])((?:docs/[\w-]+|[A-Z][A-Z_]+)\.md)\b")
    missing = sorted(
        f"{name}: {ref}"
        for name, text in _texts().items()
        if name != THIS
        for ref in named.findall(text)
        if ref.rsplit("/", 1)[-1] not in held
    )
    assert not missing, missing
