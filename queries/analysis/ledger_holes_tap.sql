-- ledger_holes from the tap's own reports (tap_reports, forensics/ingest/tapfiles.py), after
-- the seq gaps (queries/analysis/ledger_holes.sql):
--   tap-dropped     a batch the recorder dropped (first_seq .. last_seq), from the last event
--                   before it to the first after it, or, when none follows (the batch was the
--                   run's last), to the time the tap dropped it; skipped where a seq gap
--                   already holds those numbers;
--   tap-unfinished  a part the tap was writing when it stopped: from the run's last recorded
--                   event to the node's next run (a restart), or open to the end;
--   tap-lost        a status that counts events dropped with no gap line to place them, or
--                   more recorded than written and dropped with no unfinished part to say
--                   where: the whole run, or from its last event on.
-- A run is the recording process's seq >> 32 (its start second); its events are the node's
-- events of that run.
INSERT INTO ledger_holes BY NAME
WITH runs AS (
    SELECT node, seq >> 32 AS run, min(ts) AS first_ts, max(ts) AS last_ts
    FROM kv_events WHERE seq IS NOT NULL GROUP BY ALL
), next_run AS (
    SELECT r.node, r.run, r.last_ts,
           (SELECT min(n.first_ts) FROM runs n WHERE n.node = r.node AND n.run > r.run)
               AS next_first_ts
    FROM runs r
), dropped AS (
    SELECT t.*,
           (SELECT max(e.ts) FROM kv_events e
            WHERE e.node = t.node AND e.seq < t.first_seq
              AND e.seq >= (t.first_seq >> 32) << 32) AS before_ts,
           (SELECT min(e.ts) FROM kv_events e
            WHERE e.node = t.node AND e.seq > t.last_seq
              AND e.seq < ((t.last_seq >> 32) + 1) << 32) AS after_ts
    FROM tap_reports t
    WHERE t.kind = 'dropped' AND t.first_seq IS NOT NULL AND t.last_seq IS NOT NULL
      AND NOT EXISTS (SELECT 1 FROM ledger_holes h
                      WHERE h.node = t.node AND h.source = 'seq'
                        AND h.first_seq <= t.first_seq AND h.last_seq >= t.last_seq)
), gapless_status AS (
    SELECT s.* FROM tap_reports s
    WHERE s.kind = 'status'
      AND (coalesce(s.dropped, 0) > 0
           AND NOT EXISTS (SELECT 1 FROM tap_reports g
                           WHERE g.kind = 'dropped' AND g.node = s.node AND g.run = s.run)
        OR coalesce(s.recorded, 0) > coalesce(s.written, 0) + coalesce(s.dropped, 0)
           AND NOT EXISTS (SELECT 1 FROM tap_reports u
                           WHERE u.kind = 'unfinished' AND u.node = s.node AND u.run = s.run))
)
SELECT node, 'tap-dropped' AS kind, before_ts AS first_ts, coalesce(after_ts, ts) AS last_ts,
       coalesce(dropped, last_seq - first_seq + 1) AS events_lost, first_seq, last_seq,
       file AS source,
       format('the tap dropped a batch of {} event(s) (seq {} to {}): its writer fell behind',
              coalesce(dropped, last_seq - first_seq + 1), first_seq, last_seq) AS detail
FROM dropped
UNION ALL
SELECT u.node, 'tap-unfinished', n.last_ts, n.next_first_ts, NULL, NULL, NULL, u.file,
       'a ledger part the tap was writing when it stopped; its events are lost'
FROM tap_reports u LEFT JOIN next_run n ON n.node = u.node AND n.run = u.run
WHERE u.kind = 'unfinished' AND u.node IS NOT NULL
UNION ALL
SELECT s.node, 'tap-lost',
       CASE WHEN coalesce(s.dropped, 0) > 0 THEN n.first_ts ELSE n.last_ts END,
       n.next_first_ts,
       greatest(coalesce(s.dropped, 0), s.recorded - s.written - coalesce(s.dropped, 0)),
       NULL, NULL, s.file,
       format('the tap''s status counts {} event(s) recorded, {} written, {} dropped, and '
              'nothing says where the missing ones fell', s.recorded, s.written, s.dropped)
FROM gapless_status s
LEFT JOIN (SELECT r.*, x.next_first_ts FROM runs r JOIN next_run x USING (node, run)) n
  ON n.node = s.node AND n.run = s.run
ORDER BY 1, 3 NULLS FIRST, 2;
