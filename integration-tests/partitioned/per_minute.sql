-- The partitions' rows counted and summed.
SELECT dt, hm, COUNT(*) AS bids, SUM(price) AS total FROM q10_files GROUP BY dt, hm;
