-- Nexmark q0: every bid, unchanged, into a blackhole.
CREATE TABLE bid (
  auction BIGINT, bidder BIGINT, price BIGINT, channel STRING, url STRING,
  dateTime TIMESTAMP(3), extra STRING
) WITH ('connector' = 'nexmark', 'nexmark.table' = 'bid', 'events.num' = '${EVENTS}');
CREATE TABLE sink (
  auction BIGINT, bidder BIGINT, price BIGINT, channel STRING, url STRING,
  dateTime TIMESTAMP(3), extra STRING
) WITH ('connector' = 'blackhole');
INSERT INTO sink SELECT * FROM bid;
