-- The text timestamp rules as first written, one pattern per rule and every value trimmed by
-- trim(): the reference the macros of queries/schema/macros.sql are checked against
-- (tests/test_timestamp_text.py). ref_offset_minutes is kvf_offset_minutes as it stands.
CREATE OR REPLACE TEMP MACRO ref_offset_minutes(x) AS
    CASE WHEN regexp_matches(
            trim(x::VARCHAR), '[0-9]:[0-9]{2}(:[0-9]{2}([.,][0-9]*)?)? ?[+-][0-9]{2}(:?[0-9]{2})?$')
        THEN TRY_CAST(regexp_extract(trim(x::VARCHAR), '([0-9]{2}):?([0-9]{2})?$', 1) AS INTEGER)
             * 60 + coalesce(TRY_CAST(nullif(regexp_extract(
                 trim(x::VARCHAR), '([0-9]{2}):?([0-9]{2})?$', 2), '') AS INTEGER), 0)
    END;
CREATE OR REPLACE TEMP MACRO ref_epoch_text(x) AS
    TRY(make_timestamp(TRY_CAST(trim(x::VARCHAR) AS BIGINT)));
CREATE OR REPLACE TEMP MACRO ref_iso_text(x) AS
    TRY_CAST(TRY_CAST(trim(x::VARCHAR) AS TIMESTAMPTZ) AS TIMESTAMP);
CREATE OR REPLACE TEMP MACRO ref_ts_any(x, assume_utc) AS
    CASE
        WHEN regexp_full_match(trim(x::VARCHAR), '-?[0-9]+') THEN ref_epoch_text(x)
        WHEN ref_offset_minutes(x) > 840 THEN NULL
        WHEN assume_utc OR regexp_matches(trim(x::VARCHAR), '([Zz]|[+-][0-9]{2}(:?[0-9]{2})?)$')
            THEN ref_iso_text(x)
    END;
CREATE OR REPLACE TEMP MACRO ref_ts(x, assume_utc) AS
    CASE
        WHEN ref_ts_any(x, assume_utc)
             BETWEEN TIMESTAMP '0001-01-01 00:00:00' AND TIMESTAMP '9999-12-31 23:59:59.999999'
            THEN ref_ts_any(x, assume_utc)
    END;
CREATE OR REPLACE TEMP MACRO ref_ts_kept(x) AS
    CASE
        WHEN regexp_full_match(trim(x::VARCHAR), '-?[0-9]+') THEN ref_epoch_text(x)
        ELSE ref_iso_text(x)
    END;
