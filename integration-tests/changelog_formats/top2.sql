SELECT customer_id, id, amount FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY customer_id ORDER BY amount DESC, id) AS rn FROM orders_debezium) WHERE rn <= 2
