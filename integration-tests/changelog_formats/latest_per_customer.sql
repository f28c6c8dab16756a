SELECT customer_id, id, status FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY customer_id ORDER BY id DESC) AS rn FROM orders_canal) WHERE rn = 1
