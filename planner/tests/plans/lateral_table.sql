-- Table functions in FROM: each becomes a Correlate chained after its input (no exchange,
-- no state), the left side's columns first; a condition other than the join's TRUE is a
-- filter after it, and a LEFT JOIN keeps rows the function gives nothing for.
SET 'parallelism.default' = '2';
CREATE FUNCTION pieces(s STRING) RETURNS TABLE (piece STRING, n INT)
  AS 'udfs.pieces' LANGUAGE PYTHON;
CREATE TABLE bid (auction BIGINT, price BIGINT, extra STRING)
  WITH ('connector' = 'datagen', 'number-of-rows' = '100');
CREATE TABLE out (auction BIGINT, piece STRING, n INT) WITH ('connector' = 'print');
CREATE TABLE counts (n INT, pieces BIGINT) WITH ('connector' = 'print');
INSERT INTO out SELECT auction, T.piece, T.n
FROM bid, LATERAL TABLE(pieces(extra)) AS T(piece, n) WHERE T.n > 3;
INSERT INTO out SELECT auction, piece, n
FROM bid LEFT JOIN LATERAL TABLE(pieces(extra)) ON TRUE;
INSERT INTO counts SELECT n, COUNT(*)
FROM bid CROSS JOIN LATERAL TABLE(pieces(extra)) AS T(piece, n) GROUP BY n;
