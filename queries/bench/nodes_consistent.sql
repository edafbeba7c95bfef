-- Whether every rebuilt node kept a run that fits its log (bench_late_outputs.py).
SELECT coalesce(bool_and(consistent), false) FROM reconstructed_nodes;
