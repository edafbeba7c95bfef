-- bench_independent: stub reads past the point where every order could be followed (sampled),
-- of all stub reads on nodes rebuilt on an allocator.
SELECT count(*) FILTER (WHERE coalesce(sampled, false)) AS sampled, count(*) AS stubs
FROM reconstructed_requests
WHERE stub AND node IN (SELECT node FROM reconstructed_nodes WHERE role = 'decode');
