SELECT auction, price, rn FROM (
  SELECT auction, price, ROW_NUMBER() OVER (PARTITION BY auction ORDER BY price, ts) AS rn
  FROM bids)
WHERE rn BETWEEN 2 AND 3
