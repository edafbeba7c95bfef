-- OUT/exposures.parquet: the exposures table in a fixed order.
SELECT * FROM exposures
ORDER BY node, receiver_request_id, leaker_request_id, slot_start, kind;
