-- 10 s tumbling count per auction: append-only, each window emitted once.
INSERT INTO sink_tumble_count
SELECT auction, window_start, window_end, COUNT(*)
FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(`dateTime`), INTERVAL '10' SECOND))
GROUP BY auction, window_start, window_end;
