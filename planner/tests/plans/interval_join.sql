-- An interval join: the condition bounds the difference of the two event-time attributes,
-- so each side's rows are dropped once the watermark puts them out of the other's reach.
SET 'parallelism.default' = '2';
CREATE TABLE bid (auction BIGINT, price BIGINT, dateTime TIMESTAMP(3),
  WATERMARK FOR dateTime AS dateTime - INTERVAL '4' SECOND)
  WITH ('connector' = 'nexmark', 'nexmark.table' = 'bid', 'events.num' = '1000');
CREATE TABLE auction (id BIGINT, seller BIGINT, dateTime TIMESTAMP(3),
  WATERMARK FOR dateTime AS dateTime - INTERVAL '4' SECOND)
  WITH ('connector' = 'nexmark', 'nexmark.table' = 'auction', 'events.num' = '1000');
CREATE TABLE o (id BIGINT, seller BIGINT, price BIGINT) WITH ('connector' = 'blackhole');
INSERT INTO o SELECT a.id, a.seller, b.price FROM auction AS a JOIN bid AS b
  ON a.id = b.auction AND b.dateTime BETWEEN a.dateTime AND a.dateTime + INTERVAL '2' SECOND;
