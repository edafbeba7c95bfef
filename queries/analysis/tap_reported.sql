-- Whether the tap reported anything it could not record (else its holes are not looked for).
SELECT 1 FROM tap_reports WHERE kind <> 'status' OR dropped > 0 OR recorded > written LIMIT 1;
