"""Options whose value may be left out: `--ray [ADDRESS]` (analyze, investigate, ingest) and
`--ledger-external [LOCATION]` (ingest, investigate), declared in forensics.cli.params.

The option parser needs a value after each option, so `optional_values` fills in the default
value where none is given: when the option is the last word, or the next word is another
option, or (for --ray) the next word does not look like a cluster address."""

from __future__ import annotations

import re

from forensics.base.raytasks import EMBEDDED  # --ray alone: Ray started for the run
from forensics.ledger.default import CASE_LEDGER  # --ledger-external alone

RAY_HELP = (
    "Run the per-node work as Ray tasks: on the cluster at ADDRESS (host:port, ray://host:port "
    "or auto), or, with no ADDRESS, on a Ray started here for the run. Needs the extra "
    "kvforensics[ray]."
)
LEDGER_HELP = (
    "Keep the KV ledger outside the case database: Parquet parts in node=NAME/ folders, at "
    "LOCATION (a folder, relative to the case folder unless absolute, or an fsspec URL); with "
    "no LOCATION, the case folder's kv_events/ (ingest and investigate read it in place by "
    "default when it holds such parts and nothing else; --ledger-load loads it)."
)
_ADDRESS = re.compile(r"^(auto|local|[a-z][a-z0-9+.-]*://.*|[^/\s]+:[0-9]+)$", re.IGNORECASE)


def optional_values(argv: list[str]) -> list[str]:
    """argv with the default value inserted after a bare --ray or --ledger-external."""
    out: list[str] = []
    for i, word in enumerate(argv):
        out.append(word)
        nxt = argv[i + 1] if i + 1 < len(argv) else None
        bare = nxt is None or nxt.startswith("-")
        if word == "--ray" and (bare or not _ADDRESS.match(nxt or "")):
            out.append(EMBEDDED)
        elif word == "--ledger-external" and bare:
            out.append(CASE_LEDGER)
    return out
