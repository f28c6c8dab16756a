CREATE TABLE clicks (ts TIMESTAMP(3), user_id BIGINT, amount BIGINT,
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
  WITH ('connector' = 'filesystem', 'path' = '$DIR/clicks.csv', 'format' = 'csv');
