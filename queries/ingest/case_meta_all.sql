SELECT key, value FROM case_meta ORDER BY key;
