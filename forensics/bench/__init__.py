"""Scale benchmark: make a ledger with the simulator, run ingest and analysis, and print per
stage the wall time, events per second and peak memory beside the floor measured in the same
run (DuckDB scanning every column of the same Parquet files)."""
