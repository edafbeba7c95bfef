-- A task's own catalog in a scratch database that tasks use one after another
-- (forensics.casedb.scratch): an empty in-memory catalog, {name}, the connection's default, so that
-- what the task creates is gone with it when it is detached (queries/schema/scratch_detach.sql).
ATTACH ':memory:' AS {name};
USE {name};
