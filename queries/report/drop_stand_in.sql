-- Drop an empty TEMP stand-in for a table the case database lacks ({table}: its quoted name).
DROP TABLE IF EXISTS temp.main.{table};
