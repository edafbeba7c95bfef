-- Drop the TEMP view made by report_exposure_pairs.
DROP VIEW IF EXISTS report_exposure_pairs;
