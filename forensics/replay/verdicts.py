"""Replay's verdicts (docs/DESIGN.md §5), defined once for every module that writes or reads
them: replay itself, reconstruct's decisions, notify, report, the command line and bench. The
values are what replay_results.verdict and .basis and reconstructed_exposures.verdict hold
(queries/schema/replay.sql, reconstruct.sql); a confirmation raises a finding to
Confidence.CONFIRMED, the same word."""

from __future__ import annotations

from enum import StrEnum

from forensics.analysis.evidence import Confidence


class Verdict(StrEnum):
    """One replayed suspect (replay_results.verdict)."""

    CONFIRMED = Confidence.CONFIRMED.value  # the KV it read explains the delivered output
    NOT_REPRODUCED = "not-reproduced"  # it does not, with the figure
    CANNOT_REPLAY = "cannot-replay"  # no replay could be run, with the reason


class Basis(StrEnum):
    """The ground of a confirmation (replay_results.basis)."""

    REPRODUCED = "reproduced"  # greedy decoding from the KV it read gives the delivered output
    EVIDENCE = "evidence"  # the log-likelihood ratio is above the threshold


class PairVerdict(StrEnum):
    """Replay's decision on a reconstructed pair (reconstructed_exposures.verdict)."""

    CONFIRMED = Verdict.CONFIRMED.value  # the leaker's data reproduces the receiver's output
    CLEARED = "cleared"  # another candidate's does, and this one's does not
