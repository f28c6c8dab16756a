SELECT bidder, DATE_FORMAT(ts, 'HH:mm:ss.SSS'),
  COUNT(*) OVER (PARTITION BY bidder ORDER BY ts),
  SUM(price) OVER (PARTITION BY bidder ORDER BY ts)
FROM bids
