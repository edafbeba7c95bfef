-- Put the scoped rows ({source}) in place of the TEMP table {table} (a stand-in of this run).
DELETE FROM temp.main.{table};
INSERT INTO temp.main.{table} SELECT * FROM {source};
DROP TABLE {source};
