"""Run a multi-statement SQL script with named parameters ($name)."""

from __future__ import annotations

import re
from typing import Any

import duckdb

_PARAM = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")


def statements(script: str) -> list[str]:
    """Split on ';' at line ends; comments-only chunks are dropped."""
    parts = re.split(r";\s*(?:\n|$)", script)
    out = []
    for part in parts:
        body = "\n".join(line for line in part.splitlines() if not line.strip().startswith("--"))
        if body.strip():
            out.append(part.strip())
    return out


def run_script(
    con: duckdb.DuckDBPyConnection, script: str, params: dict[str, Any] | None = None
) -> None:
    """Execute each statement, binding only the parameters that statement names."""
    params = params or {}
    for statement in statements(script):
        names = set(_PARAM.findall(statement))
        bound = {k: v for k, v in params.items() if k in names}
        con.execute(statement, bound) if bound else con.execute(statement)
