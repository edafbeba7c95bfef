"""Rebuild the page trace of nodes without a KV ledger from the request log, with the node's
real allocator, and find who read whose KV in each explored order of events."""
