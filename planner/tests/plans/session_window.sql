-- Session windows: clicks per user, a session closing after 3 seconds of inactivity.
-- Clicks are generated: user = id % 4, and every 7th click comes after a long pause.
CREATE TABLE clicks (
  id      BIGINT,
  user_id AS id % 4,
  ts      AS TO_TIMESTAMP_MILLIS(id * 500 + (id / 7) * 4000),
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND
) WITH (
  'connector'       = 'datagen',
  'rows-per-second' = '0',
  'fields.id.kind'  = 'sequence',
  'fields.id.start' = '1',
  'fields.id.end'   = '70'
);

CREATE TABLE sessions (
  user_id       BIGINT,
  session_start TIMESTAMP(3),
  session_end   TIMESTAMP(3),
  clicks        BIGINT
) WITH ('connector' = 'print');

INSERT INTO sessions
SELECT user_id, window_start, window_end, COUNT(*)
FROM TABLE(SESSION(TABLE clicks PARTITION BY user_id, DESCRIPTOR(ts), INTERVAL '3' SECOND))
GROUP BY window_start, window_end, user_id;
