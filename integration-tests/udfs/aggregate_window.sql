-- Aggregate functions in tumbling windows (Flink's group window syntax).
SELECT TUMBLE_START(`dateTime`, INTERVAL '10' SECOND) AS ws, longest(extra) AS extra,
  weighted_avg(price, bidder % 3 + 1) AS wavg
FROM bid
GROUP BY TUMBLE(`dateTime`, INTERVAL '10' SECOND);
