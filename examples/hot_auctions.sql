-- Nexmark hot items: the bid count of every auction, updated continuously.
-- A non-windowed GROUP BY produces a retract changelog (-U old row, +U new row);
-- the print sink shows each change as Flink does.
SET 'parallelism.default' = '2';

CREATE TABLE bid (
  auction  BIGINT,
  bidder   BIGINT,
  price    BIGINT,
  dateTime TIMESTAMP(3),
  WATERMARK FOR dateTime AS dateTime - INTERVAL '4' SECOND
) WITH (
  'connector'     = 'nexmark',
  'nexmark.table' = 'bid',
  'events.num'    = '20000'
);

CREATE TABLE hot_auctions (
  auction   BIGINT,
  bids      BIGINT,
  max_price BIGINT
) WITH ('connector' = 'print');

INSERT INTO hot_auctions
SELECT auction, COUNT(*) AS bids, MAX(price) AS max_price
FROM bid
WHERE auction % 100 = 0
GROUP BY auction;
