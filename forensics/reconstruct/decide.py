"""Replay decides between the explored layouts of a stub's first decode read.

For a stub receiver whose contents (prompt, delivered output) and whose candidate writers'
contents are kept, the most frequent layouts over the explored orders (at most `budget` of
them) are replayed with forensics.replay's public functions: the prefill's first token from the
processed tokens, then greedy decoding over the KV the layout puts at each position. A layout
that reproduces the delivered output confirms its leakers; when at least one layout reproduces
it, candidates that appear in no reproducing layout are cleared. Otherwise nothing is decided."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import duckdb

from forensics.casedb.sql import one_row, sql
from forensics.reconstruct.trace import Layout, Req
from forensics.replay import replay_available
from forensics.replay.ledger import load_contents
from forensics.replay.loader import load_model
from forensics.replay.testmodel import TEST_MODEL_NAME
from forensics.replay.verdicts import PairVerdict

CONFIRMED, CLEARED = PairVerdict.CONFIRMED, PairVerdict.CLEARED


@dataclass
class Decider:
    model: Any
    budget: int
    con: duckdb.DuckDBPyConnection
    replayed: int = 0  # layouts replayed in all
    contradicted: set[str] = field(default_factory=set)  # stubs no explored layout reproduced

    def decide(
        self, reqs: Sequence[Req], receiver: int, layouts: Counter[Layout]
    ) -> dict[int, str]:
        """Leaker index -> confirmed | cleared, for one receiver (empty: undecided). The
        replay modules that need torch are imported here, once a model is loaded."""
        from forensics.replay.decode import greedy_decode, prefill_first_token
        from forensics.replay.replay import response_sha256

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
        first = prefill_first_token(self.model, processed)
        want_sha = self._delivered_sha(r.request_id)
        reproducing: set[int] = set()
        candidates: set[int] = set()
        tried = 0
        for layout, _ in sorted(layouts.items(), key=lambda kv: (-kv[1], kv[0] is None)):
            leakers = {s[0] for s in layout if s is not None and s[0] != receiver}
            candidates |= leakers
            if tried >= self.budget:
                continue
            tried += 1
            self.replayed += 1
            slots = [None if s is None else (reqs[s[0]].request_id, s[1]) for s in layout]
            out = greedy_decode(self.model, tokens, slots, first, r.n_out)
            same = (
                out == own.output
                if own.output is not None
                else (want_sha is not None and response_sha256(out) == want_sha)
            )
            if same:
                reproducing |= leakers
        if not reproducing:
            if tried:  # replayed, and no explored layout gives what was delivered
                self.contradicted.add(r.request_id)
            return {}
        return {w: CONFIRMED if w in reproducing else CLEARED for w in candidates}

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
