SELECT id, name, region FROM customers_debezium UNION ALL SELECT id, name, region FROM customers_canal
