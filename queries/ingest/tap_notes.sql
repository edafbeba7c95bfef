-- What the tap's reports say it could not record, one line per node and kind, for the ingest
-- summary and the report (the analysis turns them into ledger holes).
SELECT CASE kind
           WHEN 'dropped' THEN format('the tap dropped {} batch(es) of {} event(s) on node {} ({}): '
                                      'the analysis treats them as holes in its ledger',
                                      count(*), sum(dropped), node, string_agg(DISTINCT file, ', '))
           WHEN 'dropped-contents' THEN format('the tap dropped {} batch(es) of contents on node {} '
                                               '({}): replay may lack their token ids',
                                               count(*), node, string_agg(DISTINCT file, ', '))
           WHEN 'unfinished' THEN format('a tap stopped while writing {} ledger part(s) of node {} '
                                         '({}): the analysis treats what they held as a hole',
                                         count(*), coalesce(node, '(unknown)'),
                                         string_agg(DISTINCT file, ', '))
       END AS note
FROM tap_reports
WHERE kind <> 'status'
GROUP BY kind, node
UNION ALL
SELECT format('the tap''s status for node {} counts {} event(s) dropped ({})', node,
              sum(dropped), string_agg(DISTINCT file, ', '))
FROM tap_reports WHERE kind = 'status' AND dropped > 0
GROUP BY node
ORDER BY 1;
