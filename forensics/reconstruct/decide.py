"""Replay decides between the explored layouts of a stub's first decode read.

For a stub receiver whose contents (prompt, delivered output) and whose candidate writers'
contents are kept, the most frequent layouts over the explored orders (at most `budget` of
them) are replayed with forensics.replay's public functions: the prefill's first token from the
processed tokens, then decoding over the KV the layout puts at each position, the delivered
tokens scored teacher-forced at the request's temperature (forensics.replay.evidence).

- A layout whose greedy decoding reproduces the delivered output confirms its leakers; the
  candidates in no reproducing layout are cleared (greedy outputs, as before).
- Otherwise (a sampled output, other kernels) the most likely layout decides: the delivered
  output must be plausible under it (as replay's own verdict asks), else nothing is decided
  and the read is marked contradicted. A candidate found only in layouts at least
  THRESHOLD_BITS less likely than the best one is cleared (a wrong layout beats the true one
  by that much with probability at most 2^-THRESHOLD_BITS, the bound replay's confirmation
  uses); a candidate in every layout within that margin is confirmed where the best layout
  also beats the stub's own clean prompt by THRESHOLD_BITS; the others stay possible.

A candidate found in a layout beyond the budget (not replayed) is never cleared."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import duckdb

from forensics.casedb.sql import one_row, sql
from forensics.reconstruct.trace import Layout, Req
from forensics.replay import replay_available
from forensics.replay.ledger import load_contents, request_temperature
from forensics.replay.loader import load_model
from forensics.replay.testmodel import TEST_MODEL_NAME
from forensics.replay.verdicts import PairVerdict

if TYPE_CHECKING:
    from forensics.replay.evidence import TokenScores

CONFIRMED, CLEARED = PairVerdict.CONFIRMED, PairVerdict.CLEARED


@dataclass
class Decider:
    model: Any
    budget: int
    con: duckdb.DuckDBPyConnection
    replayed: int = 0  # layouts replayed in all
    contradicted: set[str] = field(default_factory=set)  # stubs no explored layout reproduced

    def decide(
        self,
        reqs: Sequence[Req],
        receiver: int,
        layouts: Counter[Layout],
        unweighed: set[int] | frozenset[int] = frozenset(),
    ) -> dict[int, str]:
        """Leaker index -> confirmed | cleared, for one receiver (empty: undecided); the
        `unweighed` leakers (found in slots of runs merged into one, in layouts never listed)
        are never cleared. The replay modules that need torch are imported here, once a model
        is loaded."""
        from forensics.replay.decode import decode_with_evidence, prefill_logits
        from forensics.replay.evidence import scoring_temperature
        from forensics.replay.judge import response_sha256

        r = reqs[receiver]
        writers_idx = {s[0] for lay in layouts for s in lay if s is not None}
        contents = load_contents(self.con, [reqs[w].request_id for w in writers_idx])
        own = contents.get(r.request_id)
        if own is None or own.prompt is None or own.computed is None:
            return {}
        tokens: dict[str, list[int]] = {}
        for w in writers_idx:
            c = contents.get(reqs[w].request_id)
            if c is None or c.computed is None:
                return {}
            tokens[reqs[w].request_id] = c.computed
        processed = own.processed or own.prompt[:1]
        logits = prefill_logits(self.model, processed)
        first = int(logits.argmax().item())
        want = own.output if own.output is not None and len(own.output) == r.n_out else None
        temperature = scoring_temperature(request_temperature(self.con, r.request_id))
        want_sha = self._delivered_sha(r.request_id)
        reproducing: set[int] = set()
        candidates: set[int] = set()
        unreplayed: set[int] = set(unweighed)
        scored: list[tuple[TokenScores, set[int]]] = []
        tried = 0
        for layout, _ in sorted(layouts.items(), key=lambda kv: (-kv[1], kv[0] is None)):
            leakers = {s[0] for s in layout if s is not None and s[0] != receiver}
            if tried >= self.budget:
                unreplayed |= leakers  # never cleared on layouts that were not weighed
                continue
            candidates |= leakers
            tried += 1
            self.replayed += 1
            slots = [None if s is None else (reqs[s[0]].request_id, s[1]) for s in layout]
            res = decode_with_evidence(
                self.model, tokens, slots, first, r.n_out, None, None, want, logits, temperature
            )
            if want is not None:
                same = res.tokens == want
            else:
                same = want_sha is not None and response_sha256(res.tokens) == want_sha
            if same:
                reproducing |= leakers
            if res.scores is not None:
                scored.append((res.scores, leakers))
        if reproducing:
            out: dict[int, str] = {w: CLEARED for w in candidates - reproducing - unreplayed}
            return out | {w: CONFIRMED for w in reproducing}
        verdicts = self._most_likely(
            own.prompt, r.n_out, want, temperature, scored, candidates - unreplayed
        )
        if tried and verdicts is None:  # replayed, and no explored layout explains the output
            self.contradicted.add(r.request_id)
        return verdicts or {}

    def _most_likely(
        self,
        prompt: list[int],
        n_out: int,
        want: list[int] | None,
        temperature: float,
        scored: list[tuple[TokenScores, set[int]]],
        candidates: set[int],
    ) -> dict[int, str] | None:
        """Verdicts from the layouts' scores of the delivered output; None when the most
        likely layout does not make it plausible (or nothing was scored). Only `candidates`
        (found in no layout left unweighed) may be cleared."""
        from forensics.replay.decode import decode_own
        from forensics.replay.evidence import THRESHOLD_BITS, weigh

        if want is None or not scored:
            return None
        total = [sum(sc.bits) for sc, _ in scored]
        best = max(range(len(scored)), key=lambda k: total[k])
        _, clean = decode_own(self.model, prompt, n_out, None, want, temperature)
        if clean.scores is None:
            return None
        evidence = weigh(scored[best][0], clean.scores, temperature)
        if evidence is None or not evidence.plausible:
            return None
        near = [
            lk
            for (_, lk), t in zip(scored, total, strict=True)
            if t >= total[best] - THRESHOLD_BITS
        ]
        kept = set().union(*near)
        everywhere = set.intersection(*near) if evidence.strong else set()
        out: dict[int, str] = {w: CLEARED for w in candidates - kept}
        return out | {w: CONFIRMED for w in everywhere}

    def _delivered_sha(self, request_id: str) -> str | None:
        row = one_row(self.con.execute(sql("reconstruct/response_sha"), {"request_id": request_id}))
        return None if row is None or row[0] is None else str(row[0])


def load_decider(
    con: duckdb.DuckDBPyConnection, spec: str | None, device: str, budget: int
) -> Decider | None:
    """A Decider when a replay model is given (or the request log names the test model for
    every request) and the replay extra is installed; else None."""
    if budget <= 0 or not replay_available():
        return None
    if spec is None:
        models = {m for (m,) in con.execute(sql("reconstruct/models")).fetchall()}
        if models != {TEST_MODEL_NAME}:
            return None
        spec = "test"
    return Decider(load_model(spec, device), budget, con.cursor())  # its own result set
