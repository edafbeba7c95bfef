-- Drop the TEMP table the timeline was built in.
DROP TABLE IF EXISTS timeline_lines;
