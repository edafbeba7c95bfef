"""mkdocs hook (mkdocs.yml `hooks:`): pages that other work adds to docs/ are listed in the nav
ahead of time; an entry whose page does not exist yet is dropped here, so that the strict build
passes with or without them. Every other nav entry must exist (a typo still fails the build)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

OPTIONAL = {"guides/probe.md", "guides/scoping.md", "measurements/real-vllm.md"}


def _keep(entry: Any, docs: Path) -> bool:
    if isinstance(entry, dict):
        (value,) = entry.values()
        if isinstance(value, str):
            return value not in OPTIONAL or (docs / value).is_file()
        entry[next(iter(entry))] = _pruned(value, docs)
        return bool(entry[next(iter(entry))])
    return not isinstance(entry, str) or entry not in OPTIONAL or (docs / entry).is_file()


def _pruned(nav: list[Any], docs: Path) -> list[Any]:
    return [entry for entry in nav if _keep(entry, docs)]


def on_config(config: Any) -> Any:
    docs = Path(config["docs_dir"])
    if config["nav"]:
        config["nav"] = _pruned(config["nav"], docs)
    return config
