-- The bids of each auction's first 10 seconds, as a regular join: the same pairs, but
-- the condition (a difference of times) is not one the planner bounds, so both sides stay.
-- Run by bench/joins.sh with EVENTS events.
CREATE TABLE bid (auction BIGINT, bidder BIGINT, price BIGINT, `dateTime` TIMESTAMP(3), extra STRING,
  WATERMARK FOR `dateTime` AS `dateTime` - INTERVAL '4' SECOND)
  WITH ('connector' = 'nexmark', 'nexmark.table' = 'bid', 'events.num' = '$EVENTS');
CREATE TABLE auction (id BIGINT, seller BIGINT, `dateTime` TIMESTAMP(3), extra STRING,
  WATERMARK FOR `dateTime` AS `dateTime` - INTERVAL '4' SECOND)
  WITH ('connector' = 'nexmark', 'nexmark.table' = 'auction', 'events.num' = '$EVENTS');
CREATE TABLE out (id BIGINT, seller BIGINT, price BIGINT) WITH ('connector' = 'blackhole');
INSERT INTO out SELECT A.id, A.seller, B.price FROM auction A JOIN bid B
  ON A.id = B.auction AND B.`dateTime` >= A.`dateTime` AND B.`dateTime` - A.`dateTime` <= INTERVAL '10' SECOND;
