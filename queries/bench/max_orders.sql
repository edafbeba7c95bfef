-- bench_reconstruct: the most event orders any reconstructed node explored.
SELECT max(orders) FROM reconstructed_nodes;
