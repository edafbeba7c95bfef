-- Write a query's rows as Parquet (zstd).
-- {query}: the text of a query in queries/ (forensics.casedb.sql.nested); $path: the file.
COPY ({query}) TO $path (FORMAT parquet, COMPRESSION zstd);
