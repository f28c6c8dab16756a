-- A view names its columns, as Flink's `CREATE VIEW name (columns) AS query`: an
-- unnamed aggregate becomes `avg_price`, which a later query reads by that name.
CREATE TABLE bid (auction BIGINT, price BIGINT)
  WITH ('connector' = 'nexmark', 'nexmark.table' = 'bid', 'events.num' = '1000');
CREATE VIEW prices (item, avg_price) AS SELECT auction, AVG(price) FROM bid GROUP BY auction;
CREATE TABLE o (n BIGINT, total BIGINT) WITH ('connector' = 'print');
INSERT INTO o SELECT COUNT(*), SUM(avg_price) FROM prices WHERE item > 10;
