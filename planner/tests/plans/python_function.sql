-- Python functions are planned where they are called, like built-ins: q14's count_char in
-- a projection and another function in a filter, chained into the source's task; an
-- aggregate function is a call of the group aggregate, its arguments one struct. Planning
-- runs no Python (the module's path does not even exist).
SET 'parallelism.default' = '2';
SET 'python.files' = '/nonexistent/udfs.py';
CREATE TEMPORARY SYSTEM FUNCTION count_char(s STRING, c STRING) RETURNS BIGINT
  AS 'udfs.count_char' LANGUAGE PYTHON;
CREATE FUNCTION is_cheap(price BIGINT) RETURNS BOOLEAN AS 'udfs.is_cheap' LANGUAGE PYTHON;
CREATE TABLE bid (auction BIGINT, price BIGINT, extra STRING)
  WITH ('connector' = 'datagen', 'number-of-rows' = '100');
CREATE TABLE out (auction BIGINT, price DECIMAL(23, 3), c_counts BIGINT)
  WITH ('connector' = 'print');
INSERT INTO out SELECT auction, 0.908 * price, count_char(extra, 'c')
FROM bid WHERE is_cheap(price) AND price > 10;
CREATE AGGREGATE FUNCTION weighted_avg(v BIGINT, w BIGINT) RETURNS BIGINT
  AS 'udfs.weighted_avg' LANGUAGE PYTHON;
CREATE TABLE averages (auction BIGINT, wavg BIGINT) WITH ('connector' = 'print');
INSERT INTO averages SELECT auction, weighted_avg(price, CHAR_LENGTH(extra))
FROM bid GROUP BY auction;
