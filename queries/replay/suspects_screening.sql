-- Suspect receivers flagged by screening: a reason that makes a possible receiver (as for
-- possible_exposures; deferred-release-timeout alone does not).
SELECT DISTINCT request_id
FROM screening
WHERE len(list_intersect(reasons, ['over-pool', 'fast-ttft', 'engine-rejected',
                                   'kv-checksum-mismatch', 'kv-canary-violation'])) > 0
ORDER BY request_id;
