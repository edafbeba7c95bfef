-- reconstruct rewrites all of its tables.
DELETE FROM reconstructed_nodes;
DELETE FROM reconstructed_requests;
DELETE FROM reconstructed_events;
DELETE FROM reconstructed_exposures;
DELETE FROM reconstructed_other_ways;
DELETE FROM reconstruct_skipped;
