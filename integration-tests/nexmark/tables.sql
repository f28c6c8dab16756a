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
