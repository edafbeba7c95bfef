DELETE FROM case_meta WHERE key = $key;
INSERT INTO case_meta VALUES ($key, $value);
