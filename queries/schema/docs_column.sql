-- Set a column's description ({text}: a quoted literal taken from the schema files).
COMMENT ON COLUMN {table}.{column} IS {text};
