-- Nexmark q11 (user sessions): bids per bidder per session, a session ending after 10 s
-- without a bid. Flink's group window syntax.
INSERT INTO sink_q11
SELECT B.bidder, COUNT(*) AS bid_count,
  SESSION_START(B.`dateTime`, INTERVAL '10' SECOND) AS starttime,
  SESSION_END(B.`dateTime`, INTERVAL '10' SECOND) AS endtime
FROM bid B
GROUP BY B.bidder, SESSION(B.`dateTime`, INTERVAL '10' SECOND);
