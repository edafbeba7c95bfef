-- Whether an ingest into the case database finished: it records the case folder in case_meta
-- with its other facts, in the transaction that stores the case (forensics.ingest.load._record).
SELECT count(*) > 0 FROM case_meta WHERE key = 'case_dir';
