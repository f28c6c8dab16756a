-- Per-customer order totals, kept up to date in PostgreSQL from the changes of its own
-- `orders` table, exactly once. PostgreSQL needs `wal_level = logical`; the role needs
-- REPLICATION (superuser here). Prepare the tables:
--   psql -c "CREATE TABLE orders (id BIGINT PRIMARY KEY, customer INT, amount NUMERIC(12, 2));
--            ALTER TABLE orders REPLICA IDENTITY FULL;
--            CREATE TABLE customer_totals (customer INT PRIMARY KEY, total NUMERIC(38, 2),
--              orders BIGINT);"
-- then `PG_PASSWORD=... eddy run examples/postgres_cdc.sql`, and change `orders` in psql:
-- `customer_totals` follows every insert, update and delete. Ctrl-C stops with a savepoint
-- (the slot stays, to resume); on a cluster, `eddy cancel` drops slot `eddy_orders`.
SET 'execution.checkpointing.interval' = '1s';

CREATE TABLE orders (id BIGINT, customer INT, amount DECIMAL(12, 2),
  PRIMARY KEY (id) NOT ENFORCED)
  WITH ('connector' = 'postgres-cdc', 'hostname' = '127.0.0.1', 'port' = '5432',
        'username' = 'postgres', 'password' = '${env:PG_PASSWORD}',
        'database-name' = 'postgres', 'table-name' = 'orders',
        'slot.name' = 'eddy_orders');

CREATE TABLE customer_totals (customer INT, total DECIMAL(38, 2), orders BIGINT,
  PRIMARY KEY (customer) NOT ENFORCED)
  WITH ('connector' = 'postgres', 'url' = 'postgres://postgres@127.0.0.1:5432/postgres',
        'table' = 'customer_totals', 'sink.delivery-guarantee' = 'exactly-once');

INSERT INTO customer_totals
SELECT customer, SUM(amount), COUNT(*) FROM orders GROUP BY customer;
