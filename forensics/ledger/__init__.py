"""A KV ledger kept outside the case database (ingest --ledger-external)."""
