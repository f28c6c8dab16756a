-- The bids, and the Python functions of udfs.py. Flink reads a Python function's types
-- from its @udf decorator, Eddy from the statement (bench/flink/query_answers.py drops the
-- argument list and RETURNS for Flink).
SET 'python.files' = '$DIR/udfs.py';
CREATE TABLE bid (auction BIGINT, bidder BIGINT, price BIGINT, channel STRING, url STRING,
  `dateTime` TIMESTAMP(3), extra STRING,
  WATERMARK FOR `dateTime` AS `dateTime` - INTERVAL '4' SECOND)
  WITH ('connector' = 'filesystem', 'path' = '$DATA/bid', 'format' = 'csv');
CREATE TEMPORARY SYSTEM FUNCTION count_char(s STRING, c STRING) RETURNS BIGINT
  AS 'udfs.count_char' LANGUAGE PYTHON;
CREATE FUNCTION count_char_pandas(s STRING, c STRING) RETURNS BIGINT
  AS 'udfs.count_char_pandas' LANGUAGE PYTHON;
CREATE FUNCTION price_band(price BIGINT) RETURNS STRING
  AS 'udfs.price_band' LANGUAGE PYTHON;
CREATE FUNCTION in_euros(price BIGINT, rate DECIMAL(6, 4)) RETURNS DECIMAL(20, 2)
  AS 'udfs.in_euros' LANGUAGE PYTHON;
CREATE FUNCTION bucket(s STRING, n INT) RETURNS INT
  AS 'udfs.bucket' LANGUAGE PYTHON;
CREATE FUNCTION second_of(t TIMESTAMP(3)) RETURNS INT
  AS 'udfs.second_of' LANGUAGE PYTHON;
CREATE FUNCTION pieces(s STRING) RETURNS TABLE (piece STRING, n INT)
  AS 'udfs.pieces' LANGUAGE PYTHON;
CREATE FUNCTION copies(price BIGINT, n INT) RETURNS TABLE (copy INT)
  AS 'udfs.copies' LANGUAGE PYTHON;
CREATE AGGREGATE FUNCTION weighted_avg(v BIGINT, w BIGINT) RETURNS BIGINT
  AS 'udfs.weighted_avg' LANGUAGE PYTHON;
CREATE AGGREGATE FUNCTION longest(s STRING) RETURNS STRING
  AS 'udfs.longest' LANGUAGE PYTHON;
