-- The way the rebuilt SGLang nodes' lists took from their named release (--sglang-free-list
-- version): one way; 'mixed' where they differ or only some took one; NULL where none did.
SELECT CASE
    WHEN count(listed_free_list) = 0 THEN NULL
    WHEN count(DISTINCT coalesce(listed_free_list, '')) = 1 THEN any_value(listed_free_list)
    ELSE 'mixed'
END AS way
FROM reconstructed_nodes
WHERE allocator = 'sglang';
