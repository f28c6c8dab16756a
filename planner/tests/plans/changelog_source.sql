-- A change stream (Debezium's JSON) is a retract source: every operator downstream takes
-- its retractions, and the sink receives updates.
SET 'parallelism.default' = '2';
CREATE TABLE orders (id BIGINT, customer_id BIGINT, amount BIGINT, status STRING)
  WITH ('connector' = 'filesystem', 'path' = '/nonexistent/orders.json',
        'format' = 'debezium-json');
CREATE TABLE customers (id BIGINT, name STRING, region STRING)
  WITH ('connector' = 'kafka', 'topic' = 'customers',
        'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'canal-json');
CREATE TABLE totals (region STRING, orders BIGINT, amount BIGINT, PRIMARY KEY (region) NOT ENFORCED)
  WITH ('connector' = 'print');
INSERT INTO totals
SELECT c.region, COUNT(*), SUM(o.amount)
FROM orders o JOIN customers c ON o.customer_id = c.id
WHERE o.status <> 'returned'
GROUP BY c.region;
