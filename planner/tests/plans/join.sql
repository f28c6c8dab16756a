-- A regular join of two streams: both sides hashed by the join key.
SET 'parallelism.default' = '2';
CREATE TABLE bid (auction BIGINT, bidder BIGINT, price BIGINT, channel STRING, url STRING,
  dateTime TIMESTAMP(3), extra STRING)
  WITH ('connector' = 'nexmark', 'nexmark.table' = 'bid', 'events.num' = '1000');
CREATE TABLE auction (id BIGINT, itemName STRING, description STRING, initialBid BIGINT,
  reserve BIGINT, dateTime TIMESTAMP(3), expires TIMESTAMP(3), seller BIGINT, category BIGINT,
  extra STRING)
  WITH ('connector' = 'nexmark', 'nexmark.table' = 'auction', 'events.num' = '1000');
CREATE TABLE o (auction BIGINT, itemName STRING, price BIGINT) WITH ('connector' = 'blackhole');
INSERT INTO o SELECT b.auction, a.itemName, b.price FROM bid AS b JOIN auction AS a ON b.auction = a.id;
