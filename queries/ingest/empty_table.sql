-- Empty an input or bookkeeping table before it is loaded again.
DELETE FROM {table};
