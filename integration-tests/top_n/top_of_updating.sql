SELECT bidder, total, rn FROM (
  SELECT bidder, total, ROW_NUMBER() OVER (ORDER BY total DESC, bidder) AS rn
  FROM (SELECT bidder, SUM(price) AS total FROM bids GROUP BY bidder))
WHERE rn <= 3
