"""The screening reasons the analysis, replay and reconstruction share, in a module that loads
nothing (the commands that only read a case import it without the compiled sweep)."""

from __future__ import annotations

# The screening reasons that make a request a suspect receiver ($suspect_reasons in
# queries/analysis/possible_exposures.sql and queries/replay/suspects_screening.sql);
# deferred-release-timeout alone does not.
SUSPECT_REASONS = (
    "over-pool",
    "fast-ttft",
    "cache-implausible",
    "token-shortfall",
    "engine-rejected",
    "kv-checksum-mismatch",
    "kv-canary-violation",
)

# The reasons under which reconstruction models a suspect as a 1-token stub
# (forensics.reconstruct; $stub_reasons in queries/analysis/possible_exposures.sql).
STUB_REASONS = (
    "over-pool",
    "engine-rejected",
    "fast-ttft",
    "cache-implausible",
    "token-shortfall",
)
