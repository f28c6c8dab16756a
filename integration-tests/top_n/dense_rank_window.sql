SELECT DATE_FORMAT(window_start, 'HH:mm:ss'), price, rk FROM (
  SELECT *, DENSE_RANK() OVER (PARTITION BY window_start, window_end ORDER BY price DESC) AS rk
  FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(ts), INTERVAL '10' SECOND)))
WHERE rk <= 2
