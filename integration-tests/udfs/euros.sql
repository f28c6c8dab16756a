-- DECIMAL in and out, a class with `open`, and a filter on a Python function's result.
SELECT auction, price, in_euros(price, 0.9172) AS euros, bucket(url, 7) AS b
FROM bid
WHERE bucket(channel, 3) = 1 AND price < 5000;
