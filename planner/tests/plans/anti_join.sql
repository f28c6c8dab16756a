-- NOT EXISTS as an anti join: an auction is emitted while no bid of it has come, and taken
-- back when the first one does (a retract stream); EXISTS would be a semi join.
SET 'parallelism.default' = '2';
CREATE TABLE bid (auction BIGINT, price BIGINT)
  WITH ('connector' = 'nexmark', 'nexmark.table' = 'bid', 'events.num' = '1000');
CREATE TABLE auction (id BIGINT, seller BIGINT)
  WITH ('connector' = 'nexmark', 'nexmark.table' = 'auction', 'events.num' = '1000');
CREATE TABLE o (id BIGINT, seller BIGINT) WITH ('connector' = 'print');
INSERT INTO o SELECT a.id, a.seller FROM auction AS a
WHERE NOT EXISTS (SELECT * FROM bid AS b WHERE b.auction = a.id AND b.price > 100);
