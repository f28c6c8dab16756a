-- The functions of functions.py ($DIR: this directory) and the sink every query writes.
SET 'python.files' = '$DIR/functions.py';
CREATE FUNCTION add_one(x BIGINT) RETURNS BIGINT AS 'functions.add_one' LANGUAGE PYTHON;
CREATE FUNCTION add_one_pandas(x BIGINT) RETURNS BIGINT
  AS 'functions.add_one_pandas' LANGUAGE PYTHON;
CREATE FUNCTION count_char(s STRING, c STRING) RETURNS BIGINT
  AS 'functions.count_char' LANGUAGE PYTHON;
CREATE FUNCTION count_char_pandas(s STRING, c STRING) RETURNS BIGINT
  AS 'functions.count_char_pandas' LANGUAGE PYTHON;
CREATE TABLE sink_udf (auction BIGINT, v BIGINT) WITH ('connector' = 'blackhole');
