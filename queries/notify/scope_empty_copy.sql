-- An empty TEMP copy of {table}, for the analysis' queries to fill from the scoped tables.
CREATE TEMP TABLE {table} AS SELECT * FROM {table} LIMIT 0;
