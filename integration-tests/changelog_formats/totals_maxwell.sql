SELECT customer_id, COUNT(*), SUM(amount), MIN(amount), MAX(amount) FROM orders_maxwell GROUP BY customer_id
