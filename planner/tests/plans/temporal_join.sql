-- An event-time temporal join: each bid joined with the version of its bidder's row valid
-- at the bid's time, from a versioned table (a primary key and a watermark). Both inputs
-- are hash-partitioned by the key; a bid waits until the watermark passes its time.
SET 'parallelism.default' = '2';
CREATE TABLE bid (auction BIGINT, bidder BIGINT, price BIGINT, dateTime TIMESTAMP(3),
  WATERMARK FOR dateTime AS dateTime - INTERVAL '4' SECOND)
  WITH ('connector' = 'nexmark', 'nexmark.table' = 'bid', 'events.num' = '1000');
CREATE TABLE person (id BIGINT, name STRING, dateTime TIMESTAMP(3), PRIMARY KEY (id) NOT ENFORCED,
  WATERMARK FOR dateTime AS dateTime - INTERVAL '4' SECOND)
  WITH ('connector' = 'nexmark', 'nexmark.table' = 'person', 'events.num' = '1000');
CREATE TABLE o (auction BIGINT, price BIGINT, name STRING) WITH ('connector' = 'print');
INSERT INTO o SELECT b.auction, b.price, p.name FROM bid AS b
  LEFT JOIN person FOR SYSTEM_TIME AS OF b.dateTime AS p ON b.bidder = p.id;
