-- The nodes whose page trace kvforensics reconstruct rebuilt, with the allocator driven.
SELECT node, role, engine, engine_version, allocator, allocator_version, page_size, pool_slots,
       requests, stubs, ambiguous_groups, orders, deferred
FROM reconstructed_nodes ORDER BY node;
