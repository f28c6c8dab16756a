-- A LEFT JOIN: every person, with each auction they sell, or NULL when they sell none (a
-- padded row that leaves when their first auction arrives).
SELECT P.id, P.name, A.id AS auction
FROM person P LEFT JOIN auction A ON P.id = A.seller;
