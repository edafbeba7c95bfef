-- ledger_holes from the ledger's own numbering, where it is the tap's: per node and run of seq
-- (seq >> 32, the run a recording process numbers: the tap's seq is its start second * 2^32 +
-- its event number, so its runs are above 0), the numbers a run skipped are events that were
-- recorded and lost (a dropped batch). A seq below 2^32 is some other producer's order, which
-- the contract does not promise to be consecutive: its gaps are not read as holes. A hole spans
-- the last event before the skipped numbers to the first after them. The numbering only counts
-- where it is consecutive: a run whose numbers cover more than twice its events, or that skips
-- more often than one event in a hundred (plus 16), is numbered some other way (one counter
-- over several nodes) and says nothing of holes; node_evidence notes it.
-- Holes the tap's own reports name (queries/analysis/ledger_holes_tap.sql) are added after.
DELETE FROM ledger_holes;

CREATE OR REPLACE TEMP TABLE analysis_seq_runs AS
SELECT node, seq >> 32 AS run, count(*) AS events, min(seq) AS lo, max(seq) AS hi
FROM kv_events WHERE seq >= 4294967296
GROUP BY ALL;

INSERT INTO ledger_holes BY NAME
WITH gappy AS (
    SELECT node, run FROM temp.analysis_seq_runs
    WHERE hi - lo + 1 > events AND hi - lo + 1 <= 2 * events
), stepped AS (
    SELECT e.node, e.seq >> 32 AS run, e.seq, e.ts,
           lag(e.seq) OVER w AS prev_seq, lag(e.ts) OVER w AS prev_ts
    FROM kv_events e SEMI JOIN gappy g ON g.node = e.node AND g.run = e.seq >> 32
    WHERE e.seq >= 4294967296
    WINDOW w AS (PARTITION BY e.node, e.seq >> 32 ORDER BY e.seq, e.input_order)
), gaps AS (
    SELECT *, count(*) OVER (PARTITION BY node, run) AS gaps_in_run
    FROM stepped WHERE seq - prev_seq > 1
)
SELECT g.node, 'seq-gap' AS kind, least(g.prev_ts, g.ts) AS first_ts,
       greatest(g.prev_ts, g.ts) AS last_ts, g.seq - g.prev_seq - 1 AS events_lost,
       g.prev_seq + 1 AS first_seq, g.seq - 1 AS last_seq,
       'seq' AS source,
       format('seq jumps from {} to {}: {} event(s) recorded and not in the ledger',
              g.prev_seq, g.seq, g.seq - g.prev_seq - 1) AS detail
FROM gaps g JOIN temp.analysis_seq_runs r USING (node, run)
WHERE g.gaps_in_run <= 16 + r.events // 100
ORDER BY g.node, g.seq;
