-- Users' records from a Kafka topic in Confluent's Avro wire format (each record's writer
-- schema fetched from the schema registry by its id and read by the table's columns),
-- appended exactly once to an Iceberg table registered in a SQL catalog on PostgreSQL:
-- Spark, Trino, DuckDB or pyiceberg read it as each checkpoint commits a snapshot.
-- Needs a broker on localhost:9092 with topic `users`, a schema registry on
-- localhost:8081 and PostgreSQL on localhost:5432; the table is created under
-- /tmp/eddy-warehouse/crm/users when the catalog lacks it. Read it back with:
--   python3 -c "from pyiceberg.catalog.sql import SqlCatalog; print(SqlCatalog('lake',
--     uri='postgresql+psycopg2://postgres@localhost:5432/postgres')
--     .load_table('crm.users').scan().to_arrow())"
SET 'execution.checkpointing.interval' = '1s';

CREATE TABLE users (id BIGINT, name STRING, amount DOUBLE, ts TIMESTAMP(3))
  WITH ('connector' = 'kafka', 'topic' = 'users',
        'properties.bootstrap.servers' = 'localhost:9092',
        'scan.startup.mode' = 'earliest-offset', 'scan.bounded.mode' = 'latest-offset',
        'format' = 'avro-confluent', 'avro-confluent.url' = 'http://localhost:8081');

CREATE TABLE users_lake (id BIGINT, name STRING, amount DOUBLE, ts TIMESTAMP(3))
  WITH ('connector' = 'iceberg', 'catalog-name' = 'lake', 'catalog-type' = 'jdbc',
        'uri' = 'jdbc:postgresql://localhost:5432/postgres', 'jdbc.user' = 'postgres',
        'catalog-database' = 'crm', 'catalog-table' = 'users',
        'warehouse' = '/tmp/eddy-warehouse');

INSERT INTO users_lake SELECT * FROM users;
