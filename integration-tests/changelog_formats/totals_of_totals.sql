SELECT cnt, COUNT(*) FROM (SELECT customer_id, COUNT(*) AS cnt FROM orders_debezium GROUP BY customer_id) GROUP BY cnt
