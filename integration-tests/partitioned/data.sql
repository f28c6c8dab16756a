-- The data of the partitioned-table tests: 10,000 events of Eddy's Nexmark generator at 100
-- a second of event time (about two minutes), its bids written twice into `$DATA`: as CSV
-- (`bid/`), and by Nexmark q10 into a table partitioned by day and minute (`q10/`), which
-- the queries here read back and Flink read to answer them.
-- Run by bench/flink/query_answers.py and by the tests before they run the queries.
CREATE TABLE gen_bid (auction BIGINT, bidder BIGINT, price BIGINT, channel STRING, url STRING,
  `dateTime` TIMESTAMP(3), extra STRING)
  WITH ('connector' = 'nexmark', 'nexmark.table' = 'bid', 'events.num' = '10000',
    'nexmark.first-event-rate' = '100');
CREATE TABLE bid_csv (auction BIGINT, bidder BIGINT, price BIGINT, channel STRING, url STRING,
  `dateTime` TIMESTAMP(3), extra STRING)
  WITH ('connector' = 'filesystem', 'path' = '$DATA/bid', 'format' = 'csv');
INSERT INTO bid_csv SELECT * FROM gen_bid;
CREATE TABLE q10_files (auction BIGINT, bidder BIGINT, price BIGINT, `dateTime` TIMESTAMP(3), extra STRING,
  dt STRING, hm STRING) PARTITIONED BY (dt, hm)
  WITH ('connector' = 'filesystem', 'path' = '$DATA/q10', 'format' = 'csv',
    'sink.partition-commit.policy.kind' = 'success-file');
INSERT INTO q10_files
SELECT auction, bidder, price, `dateTime`, extra,
  DATE_FORMAT(`dateTime`, 'yyyy-MM-dd'), DATE_FORMAT(`dateTime`, 'HH:mm')
FROM gen_bid;
