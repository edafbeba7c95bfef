"""The sweep over final ledger chunks: drives the per-slot ground-truth state of every node,
captures each decoding request's first read (its ReadView), and asks the OutputModel for the
request's output tokens in decode-start order."""

from __future__ import annotations

import numpy as np

from forensics.simulate import ledger as L
from forensics.simulate.outcome import Outcome
from forensics.simulate.outputs import OutputModel, ReadView
from forensics.simulate.traffic import Traffic, prompt_tokens
from forensics.simulate.truth import NodeState, Pieces, apply


class TokenStore:
    """Prompt, processed and generated token ids per request, built lazily."""

    def __init__(self, traffic: Traffic, outcome: Outcome, seed: int, vocab: int):
        self.tr, self.out, self.seed, self.vocab = traffic, outcome, seed, vocab
        self._prompt: dict[int, np.ndarray] = {}
        self.outputs: dict[int, list[int]] = {}

    def prompt(self, i: int) -> np.ndarray:
        if i not in self._prompt:
            self._prompt[i] = prompt_tokens(self.seed, i, self.tr, self.vocab)
        return self._prompt[i]

    def processed(self, i: int) -> np.ndarray:
        p = self.prompt(i)
        return p[:1].copy() if self.out.stub[i] else p

    def positional(self, i: int) -> np.ndarray:
        """Index p = the token whose KV request i wrote at position p (0 where it wrote none)."""
        proc = self.processed(i)
        billed = int(self.tr.prompt_len[i])
        if len(proc) < billed:
            proc = np.concatenate((proc, np.zeros(billed - len(proc), np.int64)))
        gen = np.asarray(self.outputs.get(i, []), np.int64)
        return np.concatenate((proc, gen))


class Sweep:
    """The sink of the engine's final chunks when ground truth or outputs are wanted."""

    def __init__(
        self,
        slots_per_node: list[int],
        roles: list[str],
        traffic: Traffic,
        outcome: Outcome,
        tokens: TokenStore,
        model: OutputModel | None,
    ):
        self.pieces = Pieces()
        self.states = [NodeState(n, s, self.pieces) for n, s in enumerate(slots_per_node)]
        self.roles, self.tr, self.out, self.tokens, self.model = (
            roles,
            traffic,
            outcome,
            tokens,
            model,
        )
        self.views: dict[int, list[np.ndarray]] = {}
        self.prefill_views: dict[int, list[np.ndarray]] = {}
        self.first_tokens: dict[int, int] = {}
        self.decode_order: list[int] = []

    def __call__(self, chunk: L.Chunk) -> None:
        slices = sorted(chunk.node_slices(), key=lambda x: (self.roles[x[0]] != "prefill", x[0]))
        for node, sl in slices:
            apply(self.states[node], chunk.cols, sl, self.capture)
        self.generate()

    def capture(self, state: NodeState, rid: int, a: int, b: int, ts: int, pos: int) -> None:
        """Record the slot sources of a decode-start read, or of a collided prefill read."""
        if self.roles[state.node] == "prefill":
            if not self.out.collided[rid]:
                return
            view = self.prefill_views.setdefault(rid, self._blank(int(self.tr.prompt_len[rid])))
        elif ts == self.out.decode_start_us[rid]:
            view = self.views.setdefault(rid, self._blank(int(self.tr.prompt_len[rid])))
        else:
            return
        w, p, s = state.sources(a, b)
        view[0][pos : pos + b - a], view[1][pos : pos + b - a], view[2][pos : pos + b - a] = w, p, s

    @staticmethod
    def _blank(n: int) -> list[np.ndarray]:
        return [np.full(n, -1, np.int32), np.zeros(n, np.int64), np.zeros(n, np.int8)]

    def resolve(self, writer: np.ndarray, pos: np.ndarray, src: np.ndarray) -> None:
        """Trace transfer-written KV back to the prefill KV it carried (collided prefixes)."""
        for w in np.unique(writer[src == L.SRC_TRANSFER]):
            pv = self.prefill_views.get(int(w))
            if pv is None:
                continue
            sel = (writer == w) & (src == L.SRC_TRANSFER) & (pos < len(pv[0]))
            p = pos[sel]
            writer[sel], pos[sel] = pv[0][p], pv[1][p]

    def generate(self) -> None:
        """Outputs of the requests whose first decode read is complete, in decode-start order."""
        ready = sorted(self.views, key=lambda r: (int(self.out.decode_start_us[r]), r))
        for rid in ready:
            writer, pos, src = self.views.pop(rid)
            self.resolve(writer, pos, src)
            self.decode_order.append(rid)
            if self.model is None:
                continue
            first = self.model.first_token(self.tokens.processed(rid), rid)
            view = ReadView(rid, writer, pos, self.tr.request_ids)
            self.tokens.outputs[rid] = self.model.decode(
                view, self.tokens.positional, first, int(self.out.n_out[rid])
            )
