SELECT c.region, COUNT(*), SUM(o.amount) FROM orders_canal o JOIN customers_canal c ON o.customer_id = c.id GROUP BY c.region
