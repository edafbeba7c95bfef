-- The non-blank lines of a JSON Lines file, numbered into chunks of about $chunk_bytes of text.
-- DuckDB's JSON functions keep the parsed documents of all the rows they work on at once (up to
-- 2,048), and a line of a million token ids is megabytes: parsing chunk by chunk keeps that to
-- one chunk's documents (queries/ingest/stage_lines_parse.sql).
-- (The sizes are taken first, so that the window does not carry the lines themselves.)
CREATE OR REPLACE TEMP TABLE line_chunks AS
SELECT src_row, length(line) AS chunk
FROM numbered_rows
WHERE line IS NOT NULL AND trim(line) <> '';
CREATE OR REPLACE TEMP TABLE line_chunks AS
SELECT src_row, sum(chunk) OVER (ORDER BY src_row) // $chunk_bytes AS chunk
FROM line_chunks;
CREATE OR REPLACE TEMP TABLE lines_parsed (
    src_row BIGINT, line VARCHAR, vals VARCHAR[], types VARCHAR[], line_type VARCHAR,
    twice VARCHAR
);
