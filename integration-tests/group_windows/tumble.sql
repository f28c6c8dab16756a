SELECT user_id,
  DATE_FORMAT(TUMBLE_START(ts, INTERVAL '10' SECOND), 'yyyy-MM-dd HH:mm:ss.SSS') AS window_from,
  DATE_FORMAT(TUMBLE_END(ts, INTERVAL '10' SECOND), 'yyyy-MM-dd HH:mm:ss.SSS') AS window_to,
  COUNT(*) AS clicks, SUM(amount) AS total
FROM clicks
GROUP BY TUMBLE(ts, INTERVAL '10' SECOND), user_id
