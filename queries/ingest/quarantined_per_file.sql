-- The rows quarantine holds of each of the files $files of table $table_name.
SELECT file, count(*) FROM quarantine
WHERE table_name = $table_name AND list_contains($files, file)
GROUP BY file;
