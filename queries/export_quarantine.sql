-- quarantine.csv: every row that was not loaded, with where it was and why.
COPY (
    SELECT file, "row", "column", "value", reason, table_name AS "table"
    FROM quarantine ORDER BY file, "row", "column"
) TO $target (HEADER, DELIMITER ',');
