"""The types the compiled sweep's kernels share (forensics.analysis.sweep, kinds, violations):
named tuples, which compiled code takes like plain arguments. A leaf: it imports only the run
maps and holder sets it is made of."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from forensics.analysis.holders import Holders
from forensics.analysis.runmap import RunMap


class Events(NamedTuple):
    """One node's events in their total order, as the compiled sweep reads them: event t is
    request req[t] doing op[t] on cells [c0[t], c1[t])."""

    req: np.ndarray  # int32 request codes (0 .. requests - 1)
    op: np.ndarray  # int8 codes of OPS
    c0: np.ndarray  # int32 first cell
    c1: np.ndarray  # int32 end cell (exclusive)
    hsh: np.ndarray  # int32 content-hash codes, -1 where the ledger gave none
    # Each request's alloc/share events, in compressed sparse rows: those of request r are
    # acq_idx[acq_ptr[r]:acq_ptr[r + 1]], in event order.
    acq_ptr: np.ndarray  # int64
    acq_idx: np.ndarray  # int64
    # Scratch room for the checks of one write (forensics.analysis.violations.unheld_write):
    # int64 (most alloc/share events of one request, 2).
    span: np.ndarray


class SweepMaps(NamedTuple):
    """The sweep's state: four run maps over the node's cells."""

    last_write: RunMap  # cell run -> the last write event, -1: never written
    last_writer: RunMap  # cell run -> request code of the last writer, -1: never written
    holders: (
        Holders  # cell run -> holder requests, acquired at 0 (a request's allocations coalesce)
    )
    holdings: Holders  # cell run -> holder requests with the event that acquired each holding
