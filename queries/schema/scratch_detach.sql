-- Drop a task's own catalog, {name}, and everything in it (queries/schema/scratch_attach.sql).
DETACH DATABASE IF EXISTS {name};
