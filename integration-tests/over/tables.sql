-- The bids of the Top-N tests (top_n/bids.csv), with the same watermark.
CREATE TABLE bids (ts TIMESTAMP(3), auction BIGINT, bidder BIGINT, price BIGINT,
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
  WITH ('connector' = 'filesystem', 'path' = '$DIR/../top_n/bids.csv', 'format' = 'csv');
