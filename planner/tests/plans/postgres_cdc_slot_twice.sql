-- A replication slot has one reader, and each INSERT INTO scans its tables on its own:
-- reading one postgres-cdc table in two statements is refused with the way out.
CREATE TABLE orders (id BIGINT, customer INT, PRIMARY KEY (id) NOT ENFORCED)
  WITH ('connector' = 'postgres-cdc', 'hostname' = 'db', 'username' = 'eddy',
        'database-name' = 'shop', 'table-name' = 'orders', 'slot.name' = 'eddy_orders');
CREATE TABLE a (id BIGINT) WITH ('connector' = 'blackhole');
CREATE TABLE b (customer INT, n BIGINT) WITH ('connector' = 'blackhole');
INSERT INTO a SELECT id FROM orders;
INSERT INTO b SELECT customer, COUNT(*) FROM orders GROUP BY customer;
