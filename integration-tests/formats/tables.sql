-- One file read with Flink's CSV defaults and with a null literal, another in a dialect
-- with comments, another delimiter and its own null literal.
CREATE TABLE plain (s STRING, t STRING, n STRING)
  WITH ('connector' = 'filesystem', 'path' = '$DIR/rows.csv', 'format' = 'csv');
CREATE TABLE nulls (s STRING, t STRING, n BIGINT)
  WITH ('connector' = 'filesystem', 'path' = '$DIR/rows.csv', 'format' = 'csv',
        'csv.null-literal' = 'null');
CREATE TABLE dialect (s STRING, n BIGINT)
  WITH ('connector' = 'filesystem', 'path' = '$DIR/pipes.csv', 'format' = 'csv',
        'csv.field-delimiter' = '|', 'csv.allow-comments' = 'true', 'csv.null-literal' = 'N/A');
