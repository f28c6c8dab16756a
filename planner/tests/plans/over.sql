-- OVER aggregates on event time: a bounded ROWS frame per auction, and a RANGE frame.
SET 'parallelism.default' = '2';
CREATE TABLE bids (ts TIMESTAMP(3), auction BIGINT, price BIGINT,
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH ('connector' = 'datagen');
CREATE TABLE o (auction BIGINT, price BIGINT, recent BIGINT, avg_10s BIGINT) WITH ('connector' = 'print');
INSERT INTO o SELECT auction, price,
  MAX(price) OVER (PARTITION BY auction ORDER BY ts ROWS BETWEEN 5 PRECEDING AND CURRENT ROW),
  AVG(price) OVER (PARTITION BY auction ORDER BY ts ROWS BETWEEN 5 PRECEDING AND CURRENT ROW)
FROM bids;
