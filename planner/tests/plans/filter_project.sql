-- A stateless pipeline: a filter and a projection chain into the source's task.
SET 'parallelism.default' = '2';
CREATE TABLE orders (id BIGINT, amount BIGINT, region AS id % 3)
  WITH ('connector' = 'datagen', 'number-of-rows' = '100');
CREATE TABLE large (id BIGINT, region BIGINT, amount BIGINT) WITH ('connector' = 'print');
INSERT INTO large SELECT id, region, amount * 2 FROM orders WHERE amount > 10;
