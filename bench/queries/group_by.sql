-- Unbounded GROUP BY auction with COUNT and MAX: a retract changelog into a blackhole.
CREATE TABLE bid (auction BIGINT, price BIGINT)
WITH ('connector' = 'nexmark', 'nexmark.table' = 'bid', 'events.num' = '${EVENTS}');
CREATE TABLE sink (auction BIGINT, bids BIGINT, max_price BIGINT) WITH ('connector' = 'blackhole');
INSERT INTO sink SELECT auction, COUNT(*), MAX(price) FROM bid GROUP BY auction;
