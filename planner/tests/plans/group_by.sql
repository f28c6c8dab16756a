-- An unbounded GROUP BY: a hash exchange by the key, a retract changelog into the sink.
SET 'parallelism.default' = '3';
CREATE TABLE t (id BIGINT, k AS id % 5) WITH ('connector' = 'datagen', 'number-of-rows' = '5');
CREATE TABLE o (k BIGINT, c BIGINT, s BIGINT) WITH ('connector' = 'print');
INSERT INTO o SELECT k, COUNT(*), SUM(id) FROM t GROUP BY k;
