-- Exposure runs and slots per kind and account relation.
SELECT kind,
       CASE WHEN cross_account THEN 'cross-account' WHEN NOT cross_account THEN 'same-account'
            ELSE 'account unknown' END AS relation,
       count(*) AS runs, sum(slot_count) AS slots,
       count(DISTINCT receiver_request_id) AS receivers
FROM exposures GROUP BY ALL ORDER BY kind, relation;
