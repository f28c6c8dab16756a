-- Blackhole sinks of the Nexmark queries.
CREATE TABLE sink_q0 (auction BIGINT, bidder BIGINT, price BIGINT, dateTime TIMESTAMP(3), extra STRING)
  WITH ('connector' = 'blackhole');
CREATE TABLE sink_q1 (auction BIGINT, bidder BIGINT, price DOUBLE, dateTime TIMESTAMP(3), extra STRING)
  WITH ('connector' = 'blackhole');
CREATE TABLE sink_q2 (auction BIGINT, price BIGINT) WITH ('connector' = 'blackhole');
CREATE TABLE sink_group_by (auction BIGINT, bids BIGINT, max_price BIGINT) WITH ('connector' = 'blackhole');
CREATE TABLE sink_tumble_count (auction BIGINT, window_start TIMESTAMP(3), window_end TIMESTAMP(3), bids BIGINT)
  WITH ('connector' = 'blackhole');
CREATE TABLE sink_q5 (auction BIGINT, num BIGINT) WITH ('connector' = 'blackhole');
CREATE TABLE sink_q7 (auction BIGINT, price BIGINT, bidder BIGINT, dateTime TIMESTAMP(3), extra STRING)
  WITH ('connector' = 'blackhole');
CREATE TABLE sink_q18 (auction BIGINT, bidder BIGINT, price BIGINT, channel STRING, url STRING,
  dateTime TIMESTAMP(3), extra STRING) WITH ('connector' = 'blackhole');
CREATE TABLE sink_q19 (auction BIGINT, bidder BIGINT, price BIGINT, channel STRING, url STRING,
  dateTime TIMESTAMP(3), extra STRING, rank_number BIGINT) WITH ('connector' = 'blackhole');
