-- Typed-value parsing shared by the validation queries. Each macro dispatches on the type of its
-- argument (typeof() is folded at bind time, so typed Parquet columns skip the text paths):
-- text values are parsed strictly, typed values are taken as they are.

-- Integer types DuckDB may read from Parquet.
CREATE OR REPLACE TEMP MACRO kvf_is_int_type(x) AS
    typeof(x) IN ('TINYINT', 'SMALLINT', 'INTEGER', 'BIGINT', 'HUGEINT',
                  'UTINYINT', 'USMALLINT', 'UINTEGER', 'UBIGINT');

-- The size of a text timestamp's UTC offset in minutes (NULL when it has none). Offsets beyond
-- 14:00 exist nowhere and are refused.
CREATE OR REPLACE TEMP MACRO kvf_offset_minutes(x) AS
    CASE WHEN typeof(x) = 'VARCHAR' AND regexp_matches(
            trim(x::VARCHAR), '[0-9]:[0-9]{2}(:[0-9]{2}([.,][0-9]*)?)? ?[+-][0-9]{2}(:?[0-9]{2})?$')
        THEN TRY_CAST(regexp_extract(trim(x::VARCHAR), '([0-9]{2}):?([0-9]{2})?$', 1) AS INTEGER)
             * 60 + coalesce(TRY_CAST(nullif(regexp_extract(
                 trim(x::VARCHAR), '([0-9]{2}):?([0-9]{2})?$', 2), '') AS INTEGER), 0)
    END;

-- x as text without the spaces around it: trim's result, without the copy trim makes of every
-- value longer than a few bytes (a third of the cost of typing an ISO-8601 text timestamp).
-- trim removes the space and Unicode's other spaces (U+00A0, U+2000 to U+200A, U+3000 ...),
-- which are not ASCII: text of ASCII only (as many bytes as characters) that neither starts nor
-- ends with a space is trimmed already.
CREATE OR REPLACE TEMP MACRO kvf_trimmed(x) AS
    CASE WHEN prefix(x::VARCHAR, ' ') OR suffix(x::VARCHAR, ' ')
              OR strlen(x::VARCHAR) <> length(x::VARCHAR) THEN trim(x::VARCHAR)
         ELSE x::VARCHAR
    END;

-- Whether trimmed text t is an integer: the pattern, tried only on text without a colon (an
-- ISO-8601 time has one; a CASE tries the right side of an AND on the rows the left passed).
CREATE OR REPLACE TEMP MACRO kvf_int_text(t) AS
    NOT contains(t, ':') AND regexp_full_match(t, '-?[0-9]+');

-- The two ways text becomes a timestamp (kvf_ts_any decides which applies; kvf_ts_kept applies
-- them to text ingest accepted): integer epoch microseconds, and ISO-8601 cast in the
-- connection's UTC. Result: TIMESTAMP in UTC, NULL when the text does not parse. The instant
-- becomes a TIMESTAMP by its microseconds since the epoch, as a typed instant does (below).
CREATE OR REPLACE TEMP MACRO kvf_ts_epoch_text(x) AS
    TRY(make_timestamp(TRY_CAST(kvf_trimmed(x) AS BIGINT)));
CREATE OR REPLACE TEMP MACRO kvf_ts_iso_text(x) AS
    coalesce(TRY(make_timestamp(epoch_us(TRY_CAST(kvf_trimmed(x) AS TIMESTAMPTZ)))),
             TRY_CAST(TRY_CAST(kvf_trimmed(x) AS TIMESTAMPTZ) AS TIMESTAMP));

-- A timestamp: integer epoch microseconds, or ISO-8601 with an offset ('Z', '+09:00').
-- Text without an offset is rejected unless assume_utc is true. Result: TIMESTAMP in UTC.
-- A typed instant (TIMESTAMPTZ, as Parquet ledgers hold) keeps its microseconds since the epoch:
-- the same value as the cast in the connection's UTC, at a tenth of the cost of the cast's
-- time-zone arithmetic; the cast still decides what the microseconds cannot (infinity).
CREATE OR REPLACE TEMP MACRO kvf_ts_any(x, assume_utc) AS
    CASE
        WHEN typeof(x) = 'TIMESTAMP WITH TIME ZONE' THEN coalesce(
            TRY(make_timestamp(epoch_us(TRY_CAST(x AS TIMESTAMPTZ)))), TRY_CAST(x AS TIMESTAMP))
        WHEN typeof(x) LIKE 'TIMESTAMP%' THEN TRY_CAST(x AS TIMESTAMP)
        WHEN kvf_is_int_type(x) THEN TRY(make_timestamp(TRY_CAST(x AS BIGINT)))
        WHEN typeof(x) <> 'VARCHAR' THEN NULL
        WHEN kvf_int_text(kvf_trimmed(x)) THEN kvf_ts_epoch_text(x)
        -- an offset beyond 14:00 has hours of 13 (with more than 60 minutes) or more: the exact
        -- test, three patterns, only where a cheap one finds such hours
        WHEN regexp_matches(kvf_trimmed(x), '[+-](1[3-9]|[2-9][0-9])(:?[0-9]{2})?$')
             AND kvf_offset_minutes(x) > 840 THEN NULL
        WHEN assume_utc OR regexp_matches(kvf_trimmed(x), '([Zz]|[+-][0-9]{2}(:?[0-9]{2})?)$')
            THEN kvf_ts_iso_text(x)
    END;

-- kvf_ts limited to the years 0001-9999 (what every later stage and file format can hold).
CREATE OR REPLACE TEMP MACRO kvf_ts(x, assume_utc) AS
    CASE
        WHEN kvf_ts_any(x, assume_utc)
             BETWEEN TIMESTAMP '0001-01-01 00:00:00' AND TIMESTAMP '9999-12-31 23:59:59.999999'
            THEN kvf_ts_any(x, assume_utc)
    END;

-- kvf_ts of text that ingest accepted (kvf_ts gave it a timestamp): the same timestamp, without
-- the tests that only refuse a value (no offset, an offset beyond 14:00, a year outside
-- 0001-9999), which such text passed. For the kv_events view over the parts of a ledger kept
-- outside the database that have no quarantined row (queries/ledger/view_group.sql).
CREATE OR REPLACE TEMP MACRO kvf_ts_kept(x) AS
    CASE
        WHEN kvf_int_text(kvf_trimmed(x)) THEN kvf_ts_epoch_text(x)
        ELSE kvf_ts_iso_text(x)
    END;

-- Why kvf_ts returned NULL for a non-empty value.
CREATE OR REPLACE TEMP MACRO kvf_ts_reason(x, assume_utc) AS
    CASE
        WHEN kvf_offset_minutes(x) > 840
            THEN 'UTC offset beyond 14:00; offsets run from -14:00 to +14:00'
        WHEN kvf_ts_any(x, assume_utc) IS NOT NULL
            THEN 'timestamp outside the years 0001-9999'
        WHEN NOT assume_utc
             AND NOT regexp_full_match(trim(x::VARCHAR), '-?[0-9]+')
             AND NOT regexp_matches(trim(x::VARCHAR), '([Zz]|[+-][0-9]{2}(:?[0-9]{2})?)$')
             AND TRY_CAST(trim(x::VARCHAR) AS TIMESTAMP) IS NOT NULL
            THEN 'timestamp has no UTC offset; add Z or +hh:mm, or ingest with --assume-utc'
        WHEN regexp_full_match(trim(x::VARCHAR), '-?[0-9]+')
            THEN 'integer timestamp outside the years 0001-9999 (microseconds since 1970)'
        ELSE 'not a timestamp; use ISO-8601 with an offset or integer epoch microseconds'
    END;

-- An integer, or NULL when the value is not one (text '8.0' and '1e3' are not integers).
CREATE OR REPLACE TEMP MACRO kvf_int(x) AS
    CASE
        WHEN kvf_is_int_type(x) THEN TRY_CAST(x AS BIGINT)
        WHEN typeof(x) = 'VARCHAR' AND regexp_full_match(trim(x::VARCHAR), '[+-]?[0-9]+')
            THEN TRY_CAST(trim(x::VARCHAR) AS BIGINT)
    END;

-- A list of token ids (a JSON array in text): integers >= 0, or NULL when any element is not
-- one (a negative id, or one beyond BIGINT, which the cast alone would make a NULL element).
CREATE OR REPLACE TEMP MACRO kvf_ids_whole(ids) AS
    CASE WHEN len(list_filter(ids, lambda e: e IS NULL OR e < 0)) = 0 THEN ids END;
CREATE OR REPLACE TEMP MACRO kvf_ids(x) AS
    CASE
        WHEN typeof(x) LIKE '%[]' THEN kvf_ids_whole(TRY_CAST(x AS BIGINT[]))
        WHEN typeof(x) = 'VARCHAR' AND regexp_full_match(
                trim(x::VARCHAR), '\[\s*([+-]?[0-9]+\s*(,\s*[+-]?[0-9]+\s*)*)?\]')
            THEN kvf_ids_whole(TRY_CAST(trim(x::VARCHAR) AS BIGINT[]))
    END;

-- The warning for a node whose kept events carry seq on some rows only (ingest/partial_seq.sql
-- for a loaded ledger, ledger/partial_seq.sql for one kept outside the database).
CREATE OR REPLACE TEMP MACRO kvf_partial_seq_reason(node, with_seq, total) AS
    'node ' || node || ': ' || with_seq || ' event(s) carry seq and ' || (total - with_seq)
    || ' do not, so its events are ordered by ts, not seq';

-- The quarantine record of a failed check.
CREATE OR REPLACE TEMP MACRO kvf_bad(col, val, why) AS
    struct_pack("column" := col::VARCHAR, "value" := val::VARCHAR, reason := why::VARCHAR);

-- Text with surrounding blanks removed; NULL when empty. Accepts typed values (ids as integers).
CREATE OR REPLACE TEMP MACRO kvf_str(x) AS nullif(kvf_trimmed(x), '');

-- A text cell made safe for CSV files that a spreadsheet or a timeline viewer opens. First the
-- characters that could hide or reorder what a cell shows are written as escapes: a backslash
-- as \\, LF as \n, CR as \r, every other C0 control but TAB, DEL and the C1 controls, and the
-- bidirectional marks, embeddings, overrides and isolates (U+061C, U+200E, U+200F,
-- U+202A-U+202E, U+2066-U+2069) as \u and four lower-case hex digits (\u202e), so that every
-- record is one line and each escape reads one way (forensics.base.textsafe.csv_text, the same
-- rule). Then a value that would run as a formula (first character after any leading spaces is
-- =, +, -, @ or TAB) gets a leading apostrophe, which spreadsheets show as text. Every text
-- column of every CSV output goes through this macro; numeric columns are written as numbers.
CREATE OR REPLACE TEMP MACRO kvf_csv_text(s) AS
    CASE
        WHEN regexp_matches(s, '[\\\x00-\x08\x0a-\x1f\x7f-\x9f\x{061c}\x{200e}\x{200f}\x{202a}-\x{202e}\x{2066}-\x{2069}\x{2028}\x{2029}]')
        THEN array_to_string(list_transform(string_split(s, ''), lambda c:
            CASE
                WHEN c = '\' THEN '\\'
                WHEN c = chr(10) THEN '\n'
                WHEN c = chr(13) THEN '\r'
                WHEN regexp_matches(c, '[\x00-\x08\x0b-\x1f\x7f-\x9f\x{061c}\x{200e}\x{200f}\x{202a}-\x{202e}\x{2066}-\x{2069}\x{2028}\x{2029}]')
                THEN printf('\u%04x', unicode(c))
                ELSE c
            END), '')
        ELSE s
    END;

CREATE OR REPLACE TEMP MACRO kvf_csv_cell(x) AS
    CASE
        WHEN x IS NULL THEN NULL
        WHEN regexp_matches(kvf_csv_text(x::VARCHAR), '^[ ]*[=+\-@\t]')
        THEN '''' || kvf_csv_text(x::VARCHAR)
        ELSE kvf_csv_text(x::VARCHAR)
    END;

-- The entry of list for the file an event key (its file's rank * 2^40 + its row) belongs to,
-- list holding one entry per file of a scan whose ranks run on from first_rank
-- (ingest/stage_parquet_batch.sql): its name, or its folder's node.
CREATE OR REPLACE TEMP MACRO kvf_of_part(list, event_key, first_rank) AS
    list[(event_key // 1099511627776 - first_rank)::BIGINT + 1];
