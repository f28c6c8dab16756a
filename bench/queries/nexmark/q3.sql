-- Nexmark q3 (local item suggestion): sellers in Oregon, Idaho or California with auctions
-- in category 10. A regular join of auctions and persons.
INSERT INTO sink_q3
SELECT P.name, P.city, P.state, A.id
FROM auction AS A
JOIN person AS P ON A.seller = P.id
WHERE A.category = 10 AND P.state IN ('OR', 'ID', 'CA');
