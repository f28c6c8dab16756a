SELECT auction, bidder, price, rn FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY auction ORDER BY price DESC, bidder) AS rn
  FROM bids)
WHERE rn <= 3
