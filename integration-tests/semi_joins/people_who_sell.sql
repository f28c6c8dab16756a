-- People who opened at least one auction (IN over a subquery: a semi join; each person
-- once however many auctions).
SELECT P.id, P.name, P.city
FROM person P
WHERE P.id IN (SELECT seller FROM auction);
