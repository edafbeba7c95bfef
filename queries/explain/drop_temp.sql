-- Drop a TEMP table made for explain ({table}: its quoted name).
DROP TABLE IF EXISTS temp.main.{table};
