-- A metadata key the connector does not have is refused, listing the ones it has.
CREATE TABLE orders (id BIGINT, lsn STRING METADATA FROM 'lsn' VIRTUAL,
  PRIMARY KEY (id) NOT ENFORCED)
  WITH ('connector' = 'postgres-cdc', 'hostname' = 'db', 'username' = 'eddy',
        'database-name' = 'shop', 'table-name' = 'orders', 'slot.name' = 'eddy_orders');
CREATE TABLE out (id BIGINT) WITH ('connector' = 'blackhole');
INSERT INTO out SELECT id FROM orders;
