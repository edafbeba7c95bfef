"""Requests waiting for decode pages.

A request whose pre-allocation finds too few free pages on its decode node tries again every
RETRY_US until it gets them. A failed try changes nothing, and free pages only grow when some are
released, so a request need not try at all until pages come back on its node and enough are free
for it: it waits here, and each release gives the requests it can satisfy their next try on their
own 20 ms beat (the same tries that succeed as trying every beat, at a cost that grows with the
releases instead of with the time spent waiting). Tries that fall on the same microsecond as
other events of their rank come after them, first come first served (by the time each request
first waited, then its index)."""

from __future__ import annotations

RETRY_US = 20_000
LATER = 1 << 100  # heap counters of tries are this plus their order: after every other event


class Waiting:
    """Per decode node, the requests waiting for pages: index -> (the time of its last try, the
    pages it needs, its place in line)."""

    def __init__(self, nodes: int) -> None:
        self.by_node: list[dict[int, tuple[int, int, int]]] = [{} for _ in range(nodes)]

    def wait(self, node: int, i: int, t: int, pages: int, order: int) -> None:
        """Request i found too few pages at time t (> 0). `order`: its place in line when it
        has waited before, 0 when not (it then queues by t and its index)."""
        self.by_node[node][i] = (t, pages, order or (t << 32 | i))

    def due(self, node: int, t: int, free: int) -> list[tuple[int, int, int]]:
        """Pages came back on the node at time t and `free` are free: (the time of the next
        try, index, place in line) of every waiting request that needs no more, in line order."""
        waiting = self.by_node[node]
        ready = sorted((v[2], i) for i, v in waiting.items() if v[1] <= free)
        out = []
        for order, i in ready:
            last = waiting.pop(i)[0]
            beats = max(1, -(-(t - last) // RETRY_US))
            out.append((last + beats * RETRY_US, i, order))
        return out
