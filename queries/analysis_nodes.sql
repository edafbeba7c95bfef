-- The nodes with ledger events, in a fixed order.
SELECT DISTINCT node FROM analysis_events ORDER BY node;
