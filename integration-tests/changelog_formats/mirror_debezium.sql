SELECT id, customer_id, amount, status, ts FROM orders_debezium
