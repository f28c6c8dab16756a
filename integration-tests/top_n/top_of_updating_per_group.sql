SELECT auction, bidder, bids, rn FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY auction ORDER BY bids DESC, bidder) AS rn
  FROM (SELECT auction, bidder, COUNT(*) AS bids FROM bids GROUP BY auction, bidder))
WHERE rn <= 2
