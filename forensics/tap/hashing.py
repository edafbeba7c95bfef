"""The tap's content identity of token prefixes, computed from the token ids themselves.

A block's identity chains the identity of everything before it: h(b) = H(h(b-1) || tokens of
block b). Two requests get the same identity for a block exactly when their token ids agree on
every position up to the block's end, whatever key the engine's own prefix cache used, so a
collision in the engine's key shows up as a `prefix-mismatch` in the analysis."""

from __future__ import annotations

import hashlib
from array import array
from collections.abc import Sequence

ROOT = b"kvforensics-tap-v1"


def chain(previous: bytes, tokens: Sequence[int]) -> bytes:
    """The identity of a block holding `tokens` after the prefix whose identity is `previous`."""
    h = hashlib.blake2b(previous, digest_size=16)
    h.update(array("q", tokens).tobytes())
    return h.digest()


def label(digest: bytes) -> str:
    """The content_hash text written to the ledger."""
    return "tap:" + digest.hex()


class PrefixHashes:
    """Identities of a request's full blocks, extended as its tokens become known."""

    __slots__ = ("block", "full")

    def __init__(self, block: int):
        self.block = block
        self.full: list[bytes] = []

    def upto(self, tokens: Sequence[int], n_blocks: int) -> list[bytes]:
        """Identities of blocks [0, n_blocks); every one of them must be full in `tokens`."""
        bs, full = self.block, self.full
        while len(full) < n_blocks:
            b = len(full)
            full.append(chain(full[-1] if full else ROOT, tokens[b * bs : (b + 1) * bs]))
        return full

    def of_block(self, tokens: Sequence[int], b: int, end: int) -> str:
        """The identity of block b holding positions [b × block, end) of `tokens`: the chained
        full-block identity when end closes the block, else one of the partial block."""
        bs = self.block
        previous = self.upto(tokens, b)[b - 1] if b else ROOT
        if end == (b + 1) * bs:
            return label(self.upto(tokens, b + 1)[b])
        return label(chain(previous, tokens[b * bs : end]))
