"""The report's evidence manifest, grouped: the facts of the run by where they come from, the
checksums of the queries by stage (folded away in the report, as they are many)."""

from __future__ import annotations

from forensics.report.context import Fact, FactGroup

# Key prefixes of the manifest facts and the heading of their group, in the report's order.
FACT_GROUPS = (
    ("report.", "This report"),
    ("manifest.parameters.", "Parameters of the run"),
    ("manifest.scope", "Scope"),
    ("manifest.", "The run"),
    ("case_meta.", "Case database"),
)
QUERY_PREFIX = "query."


def fact_groups(facts: list[Fact]) -> list[FactGroup]:
    """The facts that are not query checksums, by FACT_GROUPS (the first prefix that fits),
    empty groups left out; facts keep their order within a group."""
    groups: dict[str, list[Fact]] = {title: [] for _, title in FACT_GROUPS}
    other: list[Fact] = []
    for fact in facts:
        if fact.key.startswith(QUERY_PREFIX):
            continue
        title = next((t for prefix, t in FACT_GROUPS if fact.key.startswith(prefix)), None)
        (groups[title] if title else other).append(fact)
    found = [FactGroup(title, rows) for title, rows in groups.items() if rows]
    return found + ([FactGroup("Other", other)] if other else [])


def query_groups(facts: list[Fact]) -> list[FactGroup]:
    """The query checksums by stage (the folder of queries/ the query is in), sorted; keys are
    the query names without the stage."""
    by_stage: dict[str, list[Fact]] = {}
    for fact in facts:
        if not fact.key.startswith(QUERY_PREFIX):
            continue
        name = fact.key[len(QUERY_PREFIX) :]
        stage, _, rest = name.partition("/")
        by_stage.setdefault(stage, []).append(Fact(rest or stage, fact.value))
    return [
        FactGroup(stage, sorted(rows, key=lambda f: f.key))
        for stage, rows in sorted(by_stage.items())
    ]
