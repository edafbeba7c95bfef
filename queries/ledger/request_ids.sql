-- The request ids of the request log, for the partition checks of an external ledger.
SELECT request_id FROM requests;
