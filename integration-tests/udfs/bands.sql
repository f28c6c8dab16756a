-- A Python function as a GROUP BY key and inside an aggregate: an updating result.
SELECT price_band(price) AS band, COUNT(*) AS bids, SUM(count_char(extra, 'x')) AS xs
FROM bid
GROUP BY price_band(price);
