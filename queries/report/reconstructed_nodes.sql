-- The nodes whose page trace kvforensics reconstruct rebuilt, with the allocator driven, how
-- (variants: what was explored, what was assumed, why nothing fit) and whether any run fit.
SELECT node, role, engine, engine_version, allocator, allocator_version, page_size, pool_slots,
       requests, stubs, ambiguous_groups, orders, deferred, variants, consistent
FROM reconstructed_nodes ORDER BY node;
