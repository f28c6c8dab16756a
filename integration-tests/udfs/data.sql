-- The bids the Python functions' queries run over: those of 10,000 Nexmark events of
-- Eddy's generator, written as CSV into `$DATA/bid`.
-- Run by bench/flink/query_answers.py and by the test before they run the queries.
CREATE TABLE gen_bid (auction BIGINT, bidder BIGINT, price BIGINT, channel STRING, url STRING,
  `dateTime` TIMESTAMP(3), extra STRING)
  WITH ('connector' = 'nexmark', 'nexmark.table' = 'bid', 'events.num' = '10000',
    'nexmark.first-event-rate' = '100');
CREATE TABLE bid_csv (auction BIGINT, bidder BIGINT, price BIGINT, channel STRING, url STRING,
  `dateTime` TIMESTAMP(3), extra STRING)
  WITH ('connector' = 'filesystem', 'path' = '$DATA/bid', 'format' = 'csv');
INSERT INTO bid_csv SELECT * FROM gen_bid;
