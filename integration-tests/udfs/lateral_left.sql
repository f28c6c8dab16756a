-- LEFT JOIN LATERAL ... ON TRUE: a bid the function gives no rows for is kept, NULL-padded.
SELECT auction, bidder, price, copy
FROM bid LEFT JOIN LATERAL TABLE(copies(price, 3)) AS C(copy) ON TRUE
WHERE bidder < 1010;
