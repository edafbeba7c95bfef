-- The sweep's output, appended node by node (forensics.analysis.order): cells already mapped
-- back to slots; *_ord are event positions in analysis_events of that node; codes as in
-- forensics/analysis/codes.py.
CREATE OR REPLACE TABLE analysis_exposure_pieces (
    node VARCHAR, read_ord BIGINT, slot_start BIGINT, slot_end BIGINT, write_ord BIGINT,
    kind_code BIGINT
);
CREATE OR REPLACE TABLE analysis_read_pieces (
    node VARCHAR, read_ord BIGINT, category_code BIGINT, slot_start BIGINT, slot_end BIGINT
);
CREATE OR REPLACE TABLE analysis_violation_pieces (
    node VARCHAR, ord BIGINT, slot_start BIGINT, slot_end BIGINT, violation_code BIGINT,
    other_code BIGINT
);
