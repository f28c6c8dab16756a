-- The Nexmark events the oracle's answers are computed over: 10,000 events of Eddy's
-- generator at 100 a second of event time (windows of seconds hold tens of events),
-- written as CSV, one directory a table, into `$DATA`.
-- Run by bench/flink/query_answers.py and by the test before they run the queries.
CREATE TABLE gen_person (id BIGINT, name STRING, emailAddress STRING, creditCard STRING, city STRING,
  state STRING, `dateTime` TIMESTAMP(3), extra STRING)
  WITH ('connector' = 'nexmark', 'nexmark.table' = 'person', 'events.num' = '10000',
    'nexmark.first-event-rate' = '100');
CREATE TABLE person_csv (id BIGINT, name STRING, emailAddress STRING, creditCard STRING, city STRING,
  state STRING, `dateTime` TIMESTAMP(3), extra STRING)
  WITH ('connector' = 'filesystem', 'path' = '$DATA/person', 'format' = 'csv');
INSERT INTO person_csv SELECT * FROM gen_person;
CREATE TABLE gen_auction (id BIGINT, itemName STRING, description STRING, initialBid BIGINT, reserve BIGINT,
  `dateTime` TIMESTAMP(3), expires TIMESTAMP(3), seller BIGINT, category BIGINT, extra STRING)
  WITH ('connector' = 'nexmark', 'nexmark.table' = 'auction', 'events.num' = '10000',
    'nexmark.first-event-rate' = '100');
CREATE TABLE auction_csv (id BIGINT, itemName STRING, description STRING, initialBid BIGINT, reserve BIGINT,
  `dateTime` TIMESTAMP(3), expires TIMESTAMP(3), seller BIGINT, category BIGINT, extra STRING)
  WITH ('connector' = 'filesystem', 'path' = '$DATA/auction', 'format' = 'csv');
INSERT INTO auction_csv SELECT * FROM gen_auction;
CREATE TABLE gen_bid (auction BIGINT, bidder BIGINT, price BIGINT, channel STRING, url STRING,
  `dateTime` TIMESTAMP(3), extra STRING)
  WITH ('connector' = 'nexmark', 'nexmark.table' = 'bid', 'events.num' = '10000',
    'nexmark.first-event-rate' = '100');
CREATE TABLE bid_csv (auction BIGINT, bidder BIGINT, price BIGINT, channel STRING, url STRING,
  `dateTime` TIMESTAMP(3), extra STRING)
  WITH ('connector' = 'filesystem', 'path' = '$DATA/bid', 'format' = 'csv');
INSERT INTO bid_csv SELECT * FROM gen_bid;
