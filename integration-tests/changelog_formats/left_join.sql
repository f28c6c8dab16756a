SELECT c.id, c.name, o.id, o.status FROM customers_debezium c LEFT JOIN orders_maxwell o ON o.customer_id = c.id AND o.amount > 80
