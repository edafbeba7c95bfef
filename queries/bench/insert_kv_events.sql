-- benchmarks/bench_sweep.py: load a synthetic ledger (registered as _bench) into kv_events.
INSERT INTO kv_events BY NAME SELECT * FROM _bench;
