-- A window join: both inputs' rows belong to the same tumbling windows and the condition
-- equates both window bounds, so each window is joined once when the watermark passes its
-- end and its rows are dropped (here Nexmark q8: two window aggregates).
SET 'parallelism.default' = '2';
CREATE TABLE person (id BIGINT, name STRING, dateTime TIMESTAMP(3),
  WATERMARK FOR dateTime AS dateTime - INTERVAL '4' SECOND)
  WITH ('connector' = 'nexmark', 'nexmark.table' = 'person', 'events.num' = '1000');
CREATE TABLE auction (id BIGINT, seller BIGINT, dateTime TIMESTAMP(3),
  WATERMARK FOR dateTime AS dateTime - INTERVAL '4' SECOND)
  WITH ('connector' = 'nexmark', 'nexmark.table' = 'auction', 'events.num' = '1000');
CREATE TABLE o (id BIGINT, name STRING, starttime TIMESTAMP(3)) WITH ('connector' = 'blackhole');
INSERT INTO o
SELECT P.id, P.name, P.starttime
FROM (
  SELECT id, name, window_start AS starttime, window_end AS endtime
  FROM TABLE(TUMBLE(TABLE person, DESCRIPTOR(dateTime), INTERVAL '10' SECOND))
  GROUP BY id, name, window_start, window_end
) P
LEFT JOIN (
  SELECT seller, window_start AS starttime, window_end AS endtime
  FROM TABLE(TUMBLE(TABLE auction, DESCRIPTOR(dateTime), INTERVAL '10' SECOND))
  GROUP BY seller, window_start, window_end
) A
ON P.id = A.seller AND P.starttime = A.starttime AND P.endtime = A.endtime;
