"""Ingest: read the case folder into DuckDB, validate every row, quarantine bad rows."""
