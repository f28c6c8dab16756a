SELECT window_start, COUNT(*) FROM TABLE(TUMBLE(TABLE orders_timed, DESCRIPTOR(ts), INTERVAL '1' MINUTE)) GROUP BY window_start, window_end
