-- A TEMP copy of a table of an older case database with the columns it lacks added as NULLs
-- ({table}: its name; {shape}: an empty TEMP table of the current schema; {columns}: the
-- missing columns, taken from the shape so each keeps its type).
CREATE TEMP TABLE {table} AS
SELECT m.*, {columns} FROM {table} AS m LEFT JOIN {shape} AS s ON false;
