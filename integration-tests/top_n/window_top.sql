SELECT DATE_FORMAT(window_start, 'HH:mm:ss'), auction, bidder, price, rn FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY price DESC, bidder) AS rn
  FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(ts), INTERVAL '10' SECOND)))
WHERE rn <= 2
