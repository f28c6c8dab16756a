-- The Nexmark tables over the CSV dump of data.sql, with the benchmark's watermark.
CREATE TABLE person (id BIGINT, name STRING, emailAddress STRING, creditCard STRING, city STRING,
  `state` STRING, `dateTime` TIMESTAMP(3), extra STRING,
  WATERMARK FOR `dateTime` AS `dateTime` - INTERVAL '4' SECOND)
  WITH ('connector' = 'filesystem', 'path' = '$DATA/person', 'format' = 'csv');
CREATE TABLE auction (id BIGINT, itemName STRING, description STRING, initialBid BIGINT, reserve BIGINT,
  `dateTime` TIMESTAMP(3), expires TIMESTAMP(3), seller BIGINT, category BIGINT, extra STRING,
  WATERMARK FOR `dateTime` AS `dateTime` - INTERVAL '4' SECOND)
  WITH ('connector' = 'filesystem', 'path' = '$DATA/auction', 'format' = 'csv');
CREATE TABLE bid (auction BIGINT, bidder BIGINT, price BIGINT, channel STRING, url STRING,
  `dateTime` TIMESTAMP(3), extra STRING,
  WATERMARK FOR `dateTime` AS `dateTime` - INTERVAL '4' SECOND)
  WITH ('connector' = 'filesystem', 'path' = '$DATA/bid', 'format' = 'csv');
-- Nexmark q13's side input: a value for every even key below 3,000.
CREATE TABLE side_input (key BIGINT, `value` STRING)
  WITH ('connector' = 'filesystem', 'path' = '$DIR/side_input', 'format' = 'csv');
-- Versioned tables for temporal joins: the persons by id, and each seller's latest auction
-- (every auction a new version of its seller's row).
CREATE TABLE person_versions (id BIGINT, name STRING, emailAddress STRING, creditCard STRING,
  city STRING, `state` STRING, `dateTime` TIMESTAMP(3), extra STRING,
  PRIMARY KEY (id) NOT ENFORCED,
  WATERMARK FOR `dateTime` AS `dateTime` - INTERVAL '4' SECOND)
  WITH ('connector' = 'filesystem', 'path' = '$DATA/person', 'format' = 'csv');
CREATE TABLE seller_latest_auction (id BIGINT, itemName STRING, description STRING, initialBid BIGINT,
  reserve BIGINT, `dateTime` TIMESTAMP(3), expires TIMESTAMP(3), seller BIGINT, category BIGINT,
  extra STRING, PRIMARY KEY (seller) NOT ENFORCED,
  WATERMARK FOR `dateTime` AS `dateTime` - INTERVAL '4' SECOND)
  WITH ('connector' = 'filesystem', 'path' = '$DATA/auction', 'format' = 'csv');
