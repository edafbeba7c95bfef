-- A TEMP table {table} holding the scoped rows ({source}); it hides the case database's own
-- for the rest of the connection's work, which is never written.
CREATE TEMP TABLE {table} AS SELECT * FROM {source};
DROP TABLE {source};
