SELECT auction, price, rk FROM (
  SELECT auction, price, RANK() OVER (PARTITION BY auction ORDER BY price DESC) AS rk FROM bids)
WHERE rk <= 2
