-- The bids as CSV, and the table Nexmark q10 wrote them into, partitioned by day and minute
-- (both written by data.sql into `$DATA`).
CREATE TABLE bid (auction BIGINT, bidder BIGINT, price BIGINT, channel STRING, url STRING,
  `dateTime` TIMESTAMP(3), extra STRING,
  WATERMARK FOR `dateTime` AS `dateTime` - INTERVAL '4' SECOND)
  WITH ('connector' = 'filesystem', 'path' = '$DATA/bid', 'format' = 'csv');
CREATE TABLE q10_files (auction BIGINT, bidder BIGINT, price BIGINT, `dateTime` TIMESTAMP(3), extra STRING,
  dt STRING, hm STRING) PARTITIONED BY (dt, hm)
  WITH ('connector' = 'filesystem', 'path' = '$DATA/q10', 'format' = 'csv');
