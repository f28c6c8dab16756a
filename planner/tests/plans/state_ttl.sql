-- State TTL: `table.exec.state.ttl` for every unbounded keyed state (here the Top-N's),
-- and STATE_TTL hints naming a join's inputs (a table alias, a view) and a GROUP BY's
-- input (a subquery alias) for their own.
SET 'parallelism.default' = '2';
SET 'table.exec.state.ttl' = '1h';
CREATE TABLE bid (auction BIGINT, price BIGINT)
  WITH ('connector' = 'nexmark', 'nexmark.table' = 'bid', 'events.num' = '1000');
CREATE TABLE auction (id BIGINT, seller BIGINT)
  WITH ('connector' = 'nexmark', 'nexmark.table' = 'auction', 'events.num' = '1000');
CREATE VIEW big_bids AS SELECT * FROM bid WHERE price > 1000;
CREATE TABLE o (seller BIGINT, c BIGINT, rn BIGINT) WITH ('connector' = 'print');
INSERT INTO o
SELECT seller, c, rn FROM (
  SELECT seller, c, ROW_NUMBER() OVER (PARTITION BY seller ORDER BY c DESC) AS rn FROM (
    SELECT /*+ STATE_TTL('joined' = '10min') */ seller, COUNT(*) AS c FROM (
      SELECT /*+ STATE_TTL('a' = '1d', 'big_bids' = '30s') */ a.seller, big_bids.price
      FROM auction a JOIN big_bids ON a.id = big_bids.auction) joined
    GROUP BY seller))
WHERE rn <= 3;
