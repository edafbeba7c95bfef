-- The folder this connection's DuckDB spills into (its temp_directory setting).
SELECT current_setting('temp_directory');
