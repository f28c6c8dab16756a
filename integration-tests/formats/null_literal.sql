SELECT s, s IS NULL, t IS NULL, n, n IS NULL FROM nulls
