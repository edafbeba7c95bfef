-- Drop the TEMP table of the requests explained.
DROP TABLE IF EXISTS explain_ids;
