-- Auctions nobody bid on (NOT EXISTS: an anti join; an auction leaves when its first bid
-- comes).
SELECT A.id, A.seller, A.category
FROM auction A
WHERE NOT EXISTS (SELECT * FROM bid B WHERE B.auction = A.id);
