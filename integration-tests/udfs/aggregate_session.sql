-- Aggregate functions in session windows: sessions merge, and so do their accumulators.
SELECT channel, SESSION_START(`dateTime`, INTERVAL '2' SECOND) AS ss,
  weighted_avg(price, 1) AS avg_price, longest(url) AS url, COUNT(*) AS bids
FROM bid
GROUP BY channel, SESSION(`dateTime`, INTERVAL '2' SECOND);
