-- An event-time tumbling window: watermarks, an append-only result.
SET 'parallelism.default' = '2';
CREATE TABLE clicks (
  id BIGINT,
  user_id AS id % 4,
  ts AS TO_TIMESTAMP_MILLIS(id * 500),
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND
) WITH ('connector' = 'datagen', 'fields.id.kind' = 'sequence',
        'fields.id.start' = '1', 'fields.id.end' = '100');
CREATE TABLE per_window (user_id BIGINT, window_start TIMESTAMP(3), window_end TIMESTAMP(3), n BIGINT)
  WITH ('connector' = 'blackhole');
INSERT INTO per_window
SELECT user_id, window_start, window_end, COUNT(*)
FROM TABLE(TUMBLE(TABLE clicks, DESCRIPTOR(ts), INTERVAL '5' SECOND))
GROUP BY window_start, window_end, user_id;
