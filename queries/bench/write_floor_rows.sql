-- Rows the write floor wrote (queries/bench/write_floor.sql).
SELECT count(*) FROM ledger;
