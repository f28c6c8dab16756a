SELECT DATE_FORMAT(window_end, 'HH:mm:ss'), auction, n, rn FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY n DESC, auction) AS rn
  FROM (SELECT window_start, window_end, auction, COUNT(*) AS n
        FROM TABLE(HOP(TABLE bids, DESCRIPTOR(ts), INTERVAL '5' SECOND, INTERVAL '15' SECOND))
        GROUP BY window_start, window_end, auction))
WHERE rn <= 3
