"""Python's cyclic garbage collector held off while a stage runs.

The stages' data lives in DuckDB, Arrow and NumPy buffers, which are freed by reference counting
the moment they are dropped; the collector only finds reference cycles, which the stages hardly
make. Yet it runs whenever enough objects have been made, and a full collection walks every
object the process holds, with the GIL held: the analysis' first sweep loads numba's compiled
code, which builds hundreds of thousands of typing objects, and the collections that set off
took a tenth of a second of an analysis of 11 M events that otherwise runs in under two (273
collections, one of them a full one of 57 ms in the middle of the tasks' start), holding back
every thread that needed the GIL meanwhile.

`collector_paused` turns the collector off for a block and back on after it, as it was. The
cycles a stage does make (an exception and its traceback, say) are collected by the next
collection after it, as they would have been by one during it.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    """The cyclic garbage collector off for the block (see the module docstring); a block
    inside another leaves it off for the outer one."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()
