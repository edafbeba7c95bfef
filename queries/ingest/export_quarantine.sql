-- quarantine.csv: every row that was not loaded, with where it was and why. Text cells go
-- through kvf_csv_cell (controls and bidirectional formatting characters written as escapes,
-- formula-looking values get a leading apostrophe); DuckDB quotes fields holding commas or
-- quotes.
COPY (
    SELECT kvf_csv_cell(file) AS file, "row", kvf_csv_cell("column") AS "column",
           kvf_csv_cell("value") AS "value", kvf_csv_cell(reason) AS reason,
           kvf_csv_cell(table_name) AS "table"
    FROM quarantine ORDER BY quarantine.file, quarantine."row", quarantine."column"
) TO $target (HEADER, DELIMITER ',');
