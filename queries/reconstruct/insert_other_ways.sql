-- Store one node's pairs kept apart, registered by the caller as _rc_other.
INSERT INTO reconstructed_other_ways BY NAME SELECT * FROM _rc_other;
