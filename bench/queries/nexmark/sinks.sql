-- Blackhole sinks of the Nexmark queries.
CREATE TABLE sink_q0 (auction BIGINT, bidder BIGINT, price BIGINT, `dateTime` TIMESTAMP(3), extra STRING)
  WITH ('connector' = 'blackhole');
CREATE TABLE sink_q1 (auction BIGINT, bidder BIGINT, price DOUBLE, `dateTime` TIMESTAMP(3), extra STRING)
  WITH ('connector' = 'blackhole');
CREATE TABLE sink_q2 (auction BIGINT, price BIGINT) WITH ('connector' = 'blackhole');
CREATE TABLE sink_group_by (auction BIGINT, bids BIGINT, max_price BIGINT) WITH ('connector' = 'blackhole');
CREATE TABLE sink_group_by_bidder (bidder BIGINT, bids BIGINT, total BIGINT)
  WITH ('connector' = 'blackhole');
CREATE TABLE sink_daily_pairs (auction BIGINT, bidder BIGINT, window_start TIMESTAMP(3),
  bids BIGINT, total BIGINT) WITH ('connector' = 'blackhole');
CREATE TABLE sink_tumble_count (auction BIGINT, window_start TIMESTAMP(3), window_end TIMESTAMP(3), bids BIGINT)
  WITH ('connector' = 'blackhole');
CREATE TABLE sink_q5 (auction BIGINT, num BIGINT) WITH ('connector' = 'blackhole');
CREATE TABLE sink_q7 (auction BIGINT, price BIGINT, bidder BIGINT, `dateTime` TIMESTAMP(3), extra STRING)
  WITH ('connector' = 'blackhole');
CREATE TABLE sink_q18 (auction BIGINT, bidder BIGINT, price BIGINT, channel STRING, url STRING,
  `dateTime` TIMESTAMP(3), extra STRING) WITH ('connector' = 'blackhole');
-- q19 selects `*`: the benchmark's `bid` has a `p_time AS PROCTIME()` (for q12).
CREATE TABLE sink_q19 (auction BIGINT, bidder BIGINT, price BIGINT, channel STRING, url STRING,
  `dateTime` TIMESTAMP(3), extra STRING, p_time TIMESTAMP_LTZ(3), rank_number BIGINT)
  WITH ('connector' = 'blackhole');
CREATE TABLE sink_q3 (name STRING, city STRING, state STRING, id BIGINT)
  WITH ('connector' = 'blackhole');
CREATE TABLE sink_q4 (category BIGINT, avg_final BIGINT)
  WITH ('connector' = 'blackhole');
CREATE TABLE sink_q8 (id BIGINT, name STRING, starttime TIMESTAMP(3))
  WITH ('connector' = 'blackhole');
CREATE TABLE sink_q9 (id BIGINT, itemName STRING, description STRING, initialBid BIGINT, reserve BIGINT,
  `dateTime` TIMESTAMP(3), expires TIMESTAMP(3), seller BIGINT, category BIGINT, extra STRING,
  auction BIGINT, bidder BIGINT, price BIGINT, bid_dateTime TIMESTAMP(3), bid_extra STRING)
  WITH ('connector' = 'blackhole');
CREATE TABLE sink_q10 (auction BIGINT, bidder BIGINT, price BIGINT, `dateTime` TIMESTAMP(3), extra STRING,
  dt STRING, hm STRING)
  WITH ('connector' = 'blackhole');
CREATE TABLE sink_q11 (bidder BIGINT, bid_count BIGINT, starttime TIMESTAMP(3), endtime TIMESTAMP(3))
  WITH ('connector' = 'blackhole');
CREATE TABLE sink_q12 (bidder BIGINT, bid_count BIGINT, starttime TIMESTAMP(3), endtime TIMESTAMP(3))
  WITH ('connector' = 'blackhole');
CREATE TABLE sink_q15 (`day` STRING,
  total_bids BIGINT,
  rank1_bids BIGINT,
  rank2_bids BIGINT,
  rank3_bids BIGINT,
  total_bidders BIGINT,
  rank1_bidders BIGINT,
  rank2_bidders BIGINT,
  rank3_bidders BIGINT,
  total_auctions BIGINT,
  rank1_auctions BIGINT,
  rank2_auctions BIGINT,
  rank3_auctions BIGINT)
  WITH ('connector' = 'blackhole');
CREATE TABLE sink_q16 (channel STRING, `day` STRING, `minute` STRING,
  total_bids BIGINT,
  rank1_bids BIGINT,
  rank2_bids BIGINT,
  rank3_bids BIGINT,
  total_bidders BIGINT,
  rank1_bidders BIGINT,
  rank2_bidders BIGINT,
  rank3_bidders BIGINT,
  total_auctions BIGINT,
  rank1_auctions BIGINT,
  rank2_auctions BIGINT,
  rank3_auctions BIGINT)
  WITH ('connector' = 'blackhole');
CREATE TABLE sink_q17 (auction BIGINT, `day` STRING, total_bids BIGINT, rank1_bids BIGINT, rank2_bids BIGINT,
  rank3_bids BIGINT, min_price BIGINT, max_price BIGINT, avg_price BIGINT, sum_price BIGINT)
  WITH ('connector' = 'blackhole');
CREATE TABLE sink_q20 (auction BIGINT, bidder BIGINT, price BIGINT, channel STRING, url STRING,
  bid_dateTime TIMESTAMP(3), bid_extra STRING, itemName STRING, description STRING,
  initialBid BIGINT, reserve BIGINT, auction_dateTime TIMESTAMP(3), expires TIMESTAMP(3),
  seller BIGINT, category BIGINT, auction_extra STRING)
  WITH ('connector' = 'blackhole');
CREATE TABLE sink_q21 (auction BIGINT, bidder BIGINT, price BIGINT, channel STRING, channel_id STRING)
  WITH ('connector' = 'blackhole');
CREATE TABLE sink_q22 (auction BIGINT, bidder BIGINT, price BIGINT, channel STRING, dir1 STRING, dir2 STRING,
  dir3 STRING)
  WITH ('connector' = 'blackhole');
CREATE TABLE sink_q13 (auction BIGINT, bidder BIGINT, price BIGINT, `dateTime` TIMESTAMP(3), `value` STRING)
  WITH ('connector' = 'blackhole');
CREATE TABLE sink_interval_join (id BIGINT, seller BIGINT, bidder BIGINT, price BIGINT)
  WITH ('connector' = 'blackhole');
CREATE TABLE sink_temporal_join (auction BIGINT, bidder BIGINT, price BIGINT, name STRING,
  city STRING) WITH ('connector' = 'blackhole');
