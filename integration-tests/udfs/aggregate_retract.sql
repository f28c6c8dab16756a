-- An aggregate function over an updating input: each auction's count and total change as
-- bids arrive, so earlier values are retracted from the aggregate's accumulators.
SELECT n, weighted_avg(total, n) AS wavg, COUNT(*) AS auctions
FROM (SELECT auction, COUNT(*) AS n, SUM(price) AS total FROM bid GROUP BY auction)
GROUP BY n;
