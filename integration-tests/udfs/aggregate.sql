-- Aggregate functions in an unbounded GROUP BY (an updating result), beside a built-in.
SELECT bidder % 7 AS b, weighted_avg(price, auction % 5 + 1) AS wavg, longest(url) AS url,
  COUNT(*) AS bids
FROM bid
GROUP BY bidder % 7;
