SELECT id, amount, UPPER(status) FROM orders_canal WHERE amount > 50 AND status <> 'new'
