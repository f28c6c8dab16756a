-- A postgres-cdc table: a retract source ('changelog-mode' = 'all', whole before-images)
-- whose updates and deletes an aggregate takes back, into a PostgreSQL upsert sink.
SET 'parallelism.default' = '2';
CREATE TABLE orders (id BIGINT, customer INT, amount DECIMAL(12, 2),
  PRIMARY KEY (id) NOT ENFORCED)
  WITH ('connector' = 'postgres-cdc', 'hostname' = 'db', 'username' = 'eddy',
        'database-name' = 'shop', 'schema-name' = 'public', 'table-name' = 'orders',
        'slot.name' = 'eddy_orders');
CREATE TABLE totals (customer INT, total DECIMAL(38, 2), PRIMARY KEY (customer) NOT ENFORCED)
  WITH ('connector' = 'postgres', 'url' = 'postgres://db/shop', 'table' = 'totals');
INSERT INTO totals SELECT customer, SUM(amount) FROM orders GROUP BY customer;
