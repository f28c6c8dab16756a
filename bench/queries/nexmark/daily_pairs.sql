-- Bids and their total per auction and bidder in each day (a tumbling window): a window
-- holding nearly a key per bid until it closes (issue 35's window query larger than
-- memory; not one of the Nexmark suite's).
INSERT INTO sink_daily_pairs
SELECT auction, bidder, window_start, COUNT(*), SUM(price)
FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(`dateTime`), INTERVAL '1' DAY))
GROUP BY auction, bidder, window_start, window_end;
