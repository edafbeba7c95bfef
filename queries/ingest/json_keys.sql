-- The keys used by the JSON objects of a JSON Lines file.
SELECT DISTINCT unnest(json_keys(line)) AS key
FROM numbered_rows
WHERE CASE WHEN json_valid(line) THEN json_type(line) = 'OBJECT' ELSE false END
ORDER BY key;
