-- Flink CDC's metadata of a postgres-cdc table, read as VIRTUAL columns: the source
-- appends them after the physical columns (in their own types), and the table's
-- projection puts them where they are declared, cast to the declared types.
CREATE TABLE orders (
  id BIGINT,
  origin STRING METADATA FROM 'table_name' VIRTUAL,
  amount DECIMAL(12, 2),
  changed_at TIMESTAMP_LTZ(3) METADATA FROM 'op_ts' VIRTUAL,
  row_kind STRING METADATA VIRTUAL,
  PRIMARY KEY (id) NOT ENFORCED)
  WITH ('connector' = 'postgres-cdc', 'hostname' = 'db', 'username' = 'eddy',
        'database-name' = 'shop', 'table-name' = 'orders', 'slot.name' = 'eddy_orders');
CREATE TABLE changes (id BIGINT, origin STRING, changed_at TIMESTAMP_LTZ(3), row_kind STRING)
  WITH ('connector' = 'print');
INSERT INTO changes SELECT id, origin, changed_at, row_kind FROM orders;
