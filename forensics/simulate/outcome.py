"""What the simulated cluster did with every request (forensics.simulate.engine fills it; the
sweep over the reads and the case-folder writers read it)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class Outcome:
    """What happened to every request (arrays indexed like Traffic)."""

    n: int
    status: np.ndarray = field(init=False)
    stub: np.ndarray = field(init=False)
    first_token_us: np.ndarray = field(init=False)
    completed_us: np.ndarray = field(init=False)
    decode_start_us: np.ndarray = field(init=False)
    n_out: np.ndarray = field(init=False)
    collided: np.ndarray = field(init=False)
    cached_tokens: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        n = self.n
        self.status = np.full(n, 200, np.int16)
        self.stub = np.zeros(n, bool)
        self.first_token_us = np.full(n, -1, np.int64)
        self.completed_us = np.full(n, -1, np.int64)
        self.decode_start_us = np.full(n, -1, np.int64)
        self.n_out = np.zeros(n, np.int64)
        self.collided = np.zeros(n, bool)
        self.cached_tokens = np.zeros(n, np.int64)
