-- Facts about the runs that built the case (tool version, parameters, query checksums).
SELECT key, value FROM case_meta ORDER BY key, value;
