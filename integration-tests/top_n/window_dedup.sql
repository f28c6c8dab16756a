SELECT DATE_FORMAT(window_start, 'HH:mm:ss'), bidder, auction, price FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end, bidder ORDER BY ts DESC) AS rn
  FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(ts), INTERVAL '20' SECOND)))
WHERE rn = 1
