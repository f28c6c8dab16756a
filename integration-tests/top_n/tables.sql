CREATE TABLE bids (ts TIMESTAMP(3), auction BIGINT, bidder BIGINT, price BIGINT,
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
  WITH ('connector' = 'filesystem', 'path' = '$DIR/bids.csv', 'format' = 'csv');
