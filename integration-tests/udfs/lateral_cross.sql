-- CROSS JOIN LATERAL, the function's columns renamed, filtered on them and on the bid.
SELECT auction, bidder, piece, len
FROM bid CROSS JOIN LATERAL TABLE(pieces(extra)) AS P(piece, len)
WHERE len > 25 AND auction % 4 = 0;
