CREATE TABLE orders_debezium (id BIGINT, customer_id BIGINT, amount BIGINT, status STRING,
  ts TIMESTAMP(3))
  WITH ('connector' = 'filesystem', 'path' = '$DIR/orders.debezium.json',
        'format' = 'debezium-json');
CREATE TABLE customers_debezium (id BIGINT, name STRING, region STRING)
  WITH ('connector' = 'filesystem', 'path' = '$DIR/customers.debezium.json',
        'format' = 'debezium-json', 'debezium-json.schema-include' = 'true');
CREATE TABLE orders_canal (id BIGINT, customer_id BIGINT, amount BIGINT, status STRING,
  ts TIMESTAMP(3))
  WITH ('connector' = 'filesystem', 'path' = '$DIR/orders.canal.json',
        'format' = 'canal-json');
CREATE TABLE customers_canal (id BIGINT, name STRING, region STRING)
  WITH ('connector' = 'filesystem', 'path' = '$DIR/customers.canal.json',
        'format' = 'canal-json', 'canal-json.table.include' = 'customers');
CREATE TABLE orders_maxwell (id BIGINT, customer_id BIGINT, amount BIGINT, status STRING,
  ts TIMESTAMP(3))
  WITH ('connector' = 'filesystem', 'path' = '$DIR/orders.maxwell.json',
        'format' = 'maxwell-json');
CREATE TABLE orders_timed (id BIGINT, customer_id BIGINT, amount BIGINT, status STRING,
  ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '5' SECOND)
  WITH ('connector' = 'filesystem', 'path' = '$DIR/orders.debezium.json',
        'format' = 'debezium-json');
CREATE TABLE order_shards (id BIGINT, amount BIGINT,
  file_name STRING METADATA FROM 'file.name' VIRTUAL,
  file_size BIGINT METADATA FROM 'file.size' VIRTUAL,
  file_path STRING METADATA FROM 'file.path' VIRTUAL,
  modified TIMESTAMP_LTZ(3) METADATA FROM 'file.modification-time' VIRTUAL)
  WITH ('connector' = 'filesystem', 'path' = '$DIR/shards', 'format' = 'debezium-json');
