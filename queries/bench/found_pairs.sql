-- bench_reconstruct: every affected request per side, as the analysis lists it.
SELECT side, request_id, account_id FROM affected_requests;
