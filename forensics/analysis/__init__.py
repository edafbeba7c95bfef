"""Exposure analysis: whose KV every read saw, ownership violations, and screening.

order.py orders each node's events in DuckDB and runs sweep.py (compiled, per node, in
parallel) over them; aggregate.py joins the pieces back to requests and accounts in SQL;
screening.py screens requests no ledger covers; stage.py ties it together."""
