-- Bids per auction in 10-second tumbling event-time windows (Nexmark q5-style counts).
-- Each window is emitted once, when the watermark passes its end: an append-only result.
CREATE TABLE bid (
  auction  BIGINT,
  price    BIGINT,
  dateTime TIMESTAMP(3),
  WATERMARK FOR dateTime AS dateTime - INTERVAL '1' SECOND
) WITH (
  'connector'     = 'nexmark',
  'nexmark.table' = 'bid',
  'events.num'    = '300000'
);

CREATE TABLE bids_per_window (
  window_start TIMESTAMP(3),
  window_end   TIMESTAMP(3),
  auction      BIGINT,
  bids         BIGINT,
  top_price    BIGINT
) WITH ('connector' = 'print');

INSERT INTO bids_per_window
SELECT window_start, window_end, auction, COUNT(*), MAX(price)
FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(dateTime), INTERVAL '10' SECONDS))
GROUP BY window_start, window_end, auction
HAVING COUNT(*) > 500;
