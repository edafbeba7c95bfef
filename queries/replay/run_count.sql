-- How many replay runs the case holds (the next run is numbered after them).
SELECT count(*) FROM replay_runs;
