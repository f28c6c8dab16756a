-- Bids and their total per auction and bidder in each hour (a tumbling window): a window
-- per hour holding nearly a key per bid until it closes (issue 35's window query larger
-- than memory; not one of the Nexmark suite's).
INSERT INTO sink_hourly_pairs
SELECT auction, bidder, window_start, COUNT(*), SUM(price)
FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(`dateTime`), INTERVAL '1' HOUR))
GROUP BY auction, bidder, window_start, window_end;
