-- Request-log times that cannot be right are kept and flagged, one warning per row and column:
-- a first token sent before the request was received, a completion before the first token or
-- before the request was received, and a time before 2000 (an epoch written in seconds or
-- milliseconds, which ingest reads as microseconds, lands in 1970).
INSERT INTO ingest_warnings
SELECT 'requests', src_file, src_row, col,
       strftime(ts AT TIME ZONE 'UTC', '%Y-%m-%dT%H:%M:%S.%fZ'), why
FROM (
    SELECT src_file, src_row, 'received_at' AS col, received_at AS ts,
           'before 2000: if the log writes epoch seconds or milliseconds, convert them to '
           || 'microseconds (ingest reads an integer time as microseconds); kept' AS why
    FROM requests WHERE received_at < TIMESTAMPTZ '2000-01-01 00:00:00+00'
    UNION ALL
    SELECT src_file, src_row, 'first_token_at', first_token_at,
           'first token sent before the request was received (' || 'received_at '
           || strftime(received_at AT TIME ZONE 'UTC', '%Y-%m-%dT%H:%M:%S.%fZ')
           || '): check the two clocks and columns; kept'
    FROM requests WHERE first_token_at < received_at
    UNION ALL
    SELECT src_file, src_row, 'completed_at', completed_at,
           CASE WHEN completed_at < received_at
                THEN 'completed before the request was received'
                ELSE 'completed before the first token was sent' END
           || ': check the clocks and columns; kept'
    FROM requests
    WHERE completed_at < received_at OR completed_at < first_token_at
)
ORDER BY src_file, src_row, col;
