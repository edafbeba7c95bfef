-- Remove what an earlier load of the same log files wrote (the files are in logs_files_in).
DELETE FROM nodes WHERE src_file IN (SELECT path FROM logs_files_in);
DELETE FROM node_starts WHERE src_file IN (SELECT path FROM logs_files_in);
DELETE FROM node_facts WHERE src_file IN (SELECT path FROM logs_files_in);
DELETE FROM engine_evidence WHERE src_file IN (SELECT path FROM logs_files_in);
DELETE FROM log_files WHERE path IN (SELECT path FROM logs_files_in);
DELETE FROM node_disagreements;
DELETE FROM engine_counters WHERE src_file IN (SELECT path FROM logs_files_in);
