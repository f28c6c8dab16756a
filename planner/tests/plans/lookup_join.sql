-- A lookup join: each bid reads the row of its auction's category from a PostgreSQL table
-- as of its processing time, in the bids' own vertex, a chunk's keys in one query, through
-- a cache of 10,000 keys kept for a minute.
SET 'parallelism.default' = '2';
CREATE TABLE bid (auction BIGINT, price BIGINT, p AS PROCTIME())
  WITH ('connector' = 'nexmark', 'nexmark.table' = 'bid', 'events.num' = '1000');
CREATE TABLE categories (id BIGINT, name STRING) WITH ('connector' = 'postgres',
  'url' = 'postgres://eddy@localhost:5432/eddy', 'table' = 'categories',
  'lookup.cache' = 'PARTIAL', 'lookup.partial-cache.max-rows' = '10000',
  'lookup.partial-cache.expire-after-write' = '1min');
CREATE TABLE o (auction BIGINT, price BIGINT, category STRING) WITH ('connector' = 'print');
INSERT INTO o SELECT b.auction, b.price, c.name FROM bid AS b
  JOIN categories FOR SYSTEM_TIME AS OF b.p AS c ON b.auction % 10 = c.id;
