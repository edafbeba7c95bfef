-- One reconstructed node.
INSERT INTO reconstructed_nodes (node, role, engine, engine_version, allocator, allocator_version,
    page_size, pool_slots, requests, stubs, ambiguous_groups, orders, deferred, unread, variants,
    consistent, listed_free_list)
VALUES ($node, $role, $engine, $engine_version, $allocator, $allocator_version, $page_size,
    $pool_slots, $requests, $stubs, $ambiguous_groups, $orders, $deferred, $unread, $variants,
    $consistent, $listed_free_list);
