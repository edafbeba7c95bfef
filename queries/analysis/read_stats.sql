-- read_stats: per reading request and node, the read count and the distinct slots its reads
-- saw in each category (the sweep's category pieces, united per request and category on the
-- node by forensics.analysis.coverage).
DELETE FROM read_stats;

INSERT INTO read_stats BY NAME
SELECT c.request_id, n.node, n.reads, n.own_slots, n.shared_verified, n.shared_unverified,
       n.foreign_slots, n.uninitialised_slots
FROM temp.analysis_read_counts n
JOIN work.analysis_request_codes c USING (req_code)
ORDER BY n.node, c.request_id;
