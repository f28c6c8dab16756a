SELECT user_id,
  DATE_FORMAT(SESSION_START(ts, INTERVAL '3' SECOND), 'yyyy-MM-dd HH:mm:ss.SSS') AS session_from,
  DATE_FORMAT(SESSION_END(ts, INTERVAL '3' SECOND), 'yyyy-MM-dd HH:mm:ss.SSS') AS session_to,
  COUNT(*) AS clicks
FROM clicks
GROUP BY user_id, SESSION(ts, INTERVAL '3' SECOND)
