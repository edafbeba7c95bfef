-- A node reconstruction could not rebuild, with the reason.
INSERT INTO reconstruct_skipped (node, reason) VALUES ($node, $reason);
