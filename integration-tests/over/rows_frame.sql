SELECT auction, bidder, price,
  SUM(price) OVER w, COUNT(*) OVER w, MAX(price) OVER w, MIN(price) OVER w
FROM bids
WINDOW w AS (PARTITION BY auction ORDER BY ts ROWS BETWEEN 2 PRECEDING AND CURRENT ROW)
