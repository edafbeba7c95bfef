"""The input contract: what a case folder holds (contract, discover), the columns of each input
table (columns), a Parquet file's decoded size measured before it is read (expansion), and the
counts an ingest reports (result)."""
