-- A postgres-cdc table read as upserts ('changelog-mode' = 'upsert': new rows, deletes by
-- key, any replica identity) is followed by a ChangelogNormalize keyed by its primary key.
SET 'parallelism.default' = '2';
CREATE TABLE orders (id BIGINT, customer INT, amount DECIMAL(12, 2),
  PRIMARY KEY (id) NOT ENFORCED)
  WITH ('connector' = 'postgres-cdc', 'hostname' = 'db', 'username' = 'eddy',
        'database-name' = 'shop', 'table-name' = 'orders', 'slot.name' = 'eddy_orders',
        'changelog-mode' = 'upsert');
CREATE TABLE big (id BIGINT, amount DECIMAL(12, 2)) WITH ('connector' = 'print');
INSERT INTO big SELECT id, amount FROM orders WHERE amount > 100;
