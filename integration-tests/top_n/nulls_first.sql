SELECT auction, bidder, price, rn FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY auction ORDER BY price, bidder DESC) AS rn
  FROM (SELECT auction, bidder, CASE WHEN MOD(bidder, 7) = 0 THEN NULL ELSE price END AS price
        FROM bids))
WHERE rn <= 2
