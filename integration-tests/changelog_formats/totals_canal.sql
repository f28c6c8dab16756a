SELECT customer_id, COUNT(*), SUM(amount), MIN(amount), MAX(amount) FROM orders_canal GROUP BY customer_id
