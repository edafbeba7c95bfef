-- Set a table's description (COMMENT takes no parameter: {text} is a quoted literal taken from
-- the schema files).
COMMENT ON TABLE {table} IS {text};
