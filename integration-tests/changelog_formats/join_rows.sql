SELECT o.id, c.name, c.region, o.amount FROM orders_debezium o JOIN customers_debezium c ON o.customer_id = c.id
