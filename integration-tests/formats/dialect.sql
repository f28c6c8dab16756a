SELECT s, s IS NULL, n FROM dialect
