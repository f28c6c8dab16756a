SELECT auction, bidder, price, rn FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY auction ORDER BY price DESC, bidder DESC) AS rn
  FROM (SELECT auction, bidder, CASE WHEN MOD(bidder, 7) = 0 THEN NULL ELSE price END AS price
        FROM bids WHERE auction < 4))
WHERE rn <= 40
