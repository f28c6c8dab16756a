-- Nexmark q12 (processing-time windows): bids per bidder in 10 s tumbling windows of
-- processing time, over a bid table that declares `p_time AS PROCTIME()`. (As in Flink, the
-- windows still open when a bounded input ends are not fired.)
INSERT INTO sink_q12
SELECT bidder, COUNT(*) AS bid_count, window_start AS starttime, window_end AS endtime
FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(p_time), INTERVAL '10' SECOND))
GROUP BY bidder, window_start, window_end;
