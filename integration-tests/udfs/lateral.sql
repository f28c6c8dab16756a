-- A table function in FROM (comma join): the pieces of each bid's extra, counted by length.
SELECT T.n, COUNT(*) AS pieces, COUNT(DISTINCT auction) AS auctions
FROM bid, LATERAL TABLE(pieces(extra)) AS T(piece, n)
GROUP BY T.n;
