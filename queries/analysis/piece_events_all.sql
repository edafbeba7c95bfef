-- A partition task's analysis_piece_events, returned to the driver.
SELECT event_key, ts, request_id, slot_start, pos_start, source FROM temp.analysis_piece_events;
