-- Formatting shared by the export queries (notification lists, timeline).

-- A TIMESTAMPTZ as ISO-8601 text in UTC with microseconds and a Z
-- ('2026-08-27T10:00:06.000100Z'); one width for every value, so that spreadsheet programs and
-- data frame readers parse a whole column with one format. NULL stays NULL.
CREATE OR REPLACE TEMP MACRO kvf_iso(x) AS
    strftime(timezone('UTC', x::TIMESTAMPTZ), '%Y-%m-%dT%H:%M:%S.%fZ');

-- A deadline: the awareness time plus a number of hours (NULL when either is NULL).
CREATE OR REPLACE TEMP MACRO kvf_plus_hours(t, hours) AS
    t + to_microseconds(CAST(round(hours * 3600000000) AS BIGINT));
