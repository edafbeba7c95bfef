"""The report's evidence manifest: the run's manifest, the case database's meta and the report's
own query checksums as key/value facts, and the custody of the run; the facts grouped by where
they come from, the checksums of the queries by stage (folded away in the report, as they are
many)."""

from __future__ import annotations

import json
from typing import Any

import duckdb

from forensics import __version__, db
from forensics.report.context import Custody, Fact, FactGroup

# Key prefixes of the manifest facts and the heading of their group, in the report's order.
FACT_GROUPS = (
    ("report.", "This report"),
    ("manifest.parameters.", "Parameters of the run"),
    ("manifest.scope", "Scope"),
    ("manifest.", "The run"),
    ("case_meta.", "Case database"),
)
QUERY_PREFIX = "query."
# The report's own queries, by name prefix: their checksums are listed among the facts.
OWN_QUERIES = ("figures/", "report/", "notify/", "schema/tables")


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


def _fact_value(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)


def custody_of(manifest: dict[str, Any], manifest_sha256: str) -> Custody | None:
    """The custody facts of a manifest (or of the run writing one), None where it has none."""
    custody, env = manifest.get("custody"), manifest.get("environment")
    if not isinstance(custody, dict) or not isinstance(env, dict):
        return None
    found = env.get("libraries")
    libraries: dict[str, Any] = found if isinstance(found, dict) else {}
    return Custody(
        examiner=str(custody.get("examiner") or ""),
        case_ref=str(custody.get("case_ref") or ""),
        host=str(custody.get("host") or ""),
        signing_key=str(custody.get("signing_key") or ""),
        manifest_sha256=manifest_sha256,
        python=str(env.get("python") or ""),
        libraries=", ".join(f"{name} {v}" for name, v in sorted(libraries.items())),
    )


def manifest_facts(
    manifest: dict[str, Any],
    con: duckdb.DuckDBPyConnection,
    command: str,
    queries: dict[str, str],
) -> list[Fact]:
    """The manifest as key/value lines, one level of nesting spelled out. Its `inputs` are the
    input table above and its `stages` the figures of the report, so neither is repeated."""
    facts = [Fact("report.tool_version", f"kvforensics {__version__}")]
    if command:
        facts.append(Fact("report.command_line", command))
    for key, value in sorted(manifest.items()):
        if key in ("inputs", "stages", "custody", "environment"):  # custody: a table of its own
            continue
        if isinstance(value, dict) and value:
            facts += [Fact(f"manifest.{key}.{k}", _fact_value(v)) for k, v in sorted(value.items())]
        else:
            facts.append(Fact(f"manifest.{key}", _fact_value(value)))
    facts += [Fact(f"case_meta.{r['key']}", r["value"]) for r in db.rows(con, "report/meta")]
    facts += [
        Fact(f"query.{name}", digest)
        for name, digest in queries.items()
        if name.startswith(OWN_QUERIES)
    ]
    return facts
