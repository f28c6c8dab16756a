SELECT user_id,
  DATE_FORMAT(window_start, 'yyyy-MM-dd HH:mm:ss.SSS') AS session_from,
  DATE_FORMAT(window_end, 'yyyy-MM-dd HH:mm:ss.SSS') AS session_to,
  COUNT(*) AS clicks, SUM(amount) AS total
FROM TABLE(SESSION(TABLE clicks PARTITION BY user_id, DESCRIPTOR(ts), INTERVAL '3' SECOND))
GROUP BY window_start, window_end, user_id
