-- Top-N with the rank in the output, a deduplication keeping the first row, and a window
-- Top-N over a window aggregate.
SET 'parallelism.default' = '2';
CREATE TABLE bids (ts TIMESTAMP(3), auction BIGINT, bidder BIGINT, price BIGINT,
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH ('connector' = 'datagen');
CREATE TABLE top (auction BIGINT, bidder BIGINT, price BIGINT, rn BIGINT) WITH ('connector' = 'print');
CREATE TABLE first_bid (bidder BIGINT, auction BIGINT) WITH ('connector' = 'print');
CREATE TABLE hot (window_end TIMESTAMP(3), auction BIGINT, n BIGINT) WITH ('connector' = 'print');
INSERT INTO top SELECT auction, bidder, price, rn FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY auction ORDER BY price DESC, bidder) AS rn FROM bids)
WHERE rn <= 3;
INSERT INTO first_bid SELECT bidder, auction FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY bidder ORDER BY ts) AS rn FROM bids)
WHERE rn = 1;
INSERT INTO hot SELECT window_end, auction, n FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY n DESC) AS rn
  FROM (SELECT window_start, window_end, auction, COUNT(*) AS n
        FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(ts), INTERVAL '10' SECOND))
        GROUP BY window_start, window_end, auction))
WHERE rn <= 3;
