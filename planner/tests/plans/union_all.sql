-- UNION ALL of two scans of one table into one sink.
CREATE TABLE bid (auction BIGINT, price BIGINT) WITH ('connector' = 'nexmark',
  'nexmark.table' = 'bid', 'events.num' = '1000');
CREATE TABLE out (auction BIGINT, price BIGINT) WITH ('connector' = 'blackhole');
INSERT INTO out SELECT auction, price FROM bid WHERE price < 5000
  UNION ALL SELECT auction, price FROM bid WHERE price >= 5000;
