-- Parse a timestamp: integer epoch microseconds, or ISO-8601 with an offset ('Z', '+09:00').
-- Without an offset the value is rejected unless assume_utc is true. Result: TIMESTAMP in UTC.
CREATE OR REPLACE TEMP MACRO kvf_ts(x, assume_utc) AS
    CASE
        WHEN regexp_full_match(trim(x), '-?[0-9]+') THEN TRY(make_timestamp(TRY_CAST(trim(x) AS BIGINT)))
        WHEN assume_utc OR regexp_matches(trim(x), '([Zz]|[+-][0-9]{2}(:?[0-9]{2})?)$')
            THEN TRY_CAST(TRY_CAST(trim(x) AS TIMESTAMPTZ) AS TIMESTAMP)
    END;

-- Why kvf_ts returned NULL for a non-empty value.
CREATE OR REPLACE TEMP MACRO kvf_ts_reason(x, assume_utc) AS
    CASE
        WHEN NOT assume_utc
             AND NOT regexp_full_match(trim(x), '-?[0-9]+')
             AND NOT regexp_matches(trim(x), '([Zz]|[+-][0-9]{2}(:?[0-9]{2})?)$')
             AND TRY_CAST(trim(x) AS TIMESTAMP) IS NOT NULL
            THEN 'timestamp has no UTC offset; add Z or +hh:mm, or ingest with --assume-utc'
        ELSE 'not a timestamp; use ISO-8601 with an offset or integer epoch microseconds'
    END;

-- An integer, or NULL when the text is not one (8.0 and 1e3 are not integers).
CREATE OR REPLACE TEMP MACRO kvf_int(x) AS
    CASE WHEN regexp_full_match(trim(x), '[+-]?[0-9]+') THEN TRY_CAST(trim(x) AS BIGINT) END;

-- A JSON array of integers, or NULL when any element is not an integer.
CREATE OR REPLACE TEMP MACRO kvf_ids(x) AS
    CASE
        WHEN regexp_full_match(trim(x), '\[\s*([+-]?[0-9]+\s*(,\s*[+-]?[0-9]+\s*)*)?\]')
            THEN TRY_CAST(trim(x) AS BIGINT[])
    END;

-- The quarantine record of a failed check.
CREATE OR REPLACE TEMP MACRO kvf_bad(col, val, why) AS
    struct_pack("column" := col::VARCHAR, "value" := val::VARCHAR, reason := why::VARCHAR);
