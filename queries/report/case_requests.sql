-- How many requests the case database holds (forensics.report.casedb: an ingest that never
-- finished left its tables empty).
SELECT count(*) FROM requests;
