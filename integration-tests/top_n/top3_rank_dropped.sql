SELECT auction, bidder, price FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY auction ORDER BY price DESC, bidder DESC) AS rn
  FROM bids)
WHERE rn < 4 AND price > 20
