-- Nexmark q10 with the sink as published: bids with their day and minute, into a
-- filesystem table partitioned by both, each partition committed with a success file once
-- the watermark passes its minute plus one minute. `$OUT` is the table's directory.
CREATE TABLE sink_q10 (auction BIGINT, bidder BIGINT, price BIGINT, `dateTime` TIMESTAMP(3), extra STRING,
  dt STRING, hm STRING) PARTITIONED BY (dt, hm)
  WITH ('connector' = 'filesystem', 'path' = '$OUT', 'format' = 'csv',
    'sink.partition-commit.trigger' = 'partition-time',
    'sink.partition-commit.delay' = '1 min',
    'sink.partition-commit.policy.kind' = 'success-file',
    'partition.time-extractor.timestamp-pattern' = '$dt $hm:00',
    'sink.rolling-policy.rollover-interval' = '1min',
    'sink.rolling-policy.check-interval' = '1min');
INSERT INTO sink_q10
SELECT auction, bidder, price, `dateTime`, extra,
  DATE_FORMAT(`dateTime`, 'yyyy-MM-dd'), DATE_FORMAT(`dateTime`, 'HH:mm')
FROM bid;
