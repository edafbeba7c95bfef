"""The input contract: what a case folder holds (contract, discover), the columns of each input
table, the expansion of ledger runs, and the counts an ingest reports (result)."""
