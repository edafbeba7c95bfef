-- Store one reconstructed batch, registered by the caller as _rc_events / _rc_exposures.
INSERT INTO reconstructed_events BY NAME SELECT * FROM _rc_events;
INSERT INTO reconstructed_exposures BY NAME SELECT * FROM _rc_exposures;
