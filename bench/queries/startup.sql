-- The smallest job: one generated row into a blackhole, to time start-up and shutdown.
CREATE TABLE one (id BIGINT) WITH ('connector' = 'datagen', 'number-of-rows' = '1');
CREATE TABLE sink (id BIGINT) WITH ('connector' = 'blackhole');
INSERT INTO sink SELECT id FROM one;
