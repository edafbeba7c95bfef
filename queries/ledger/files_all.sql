-- The parts of the case's external ledger, in path order.
SELECT url, rel, node, rank FROM ledger_files ORDER BY rank;
