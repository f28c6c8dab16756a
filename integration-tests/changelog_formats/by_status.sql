SELECT status, COUNT(DISTINCT customer_id), AVG(amount), COUNT(*) FILTER (WHERE amount > 50) FROM orders_maxwell GROUP BY status
