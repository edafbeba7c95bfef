INSERT INTO input_files VALUES ($path, $table, $sha256, $bytes, $rows_read, $rows_loaded,
                                $rows_quarantined);
