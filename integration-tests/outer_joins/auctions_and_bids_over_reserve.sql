-- A RIGHT JOIN whose ON clause has a condition beside the key: every auction, with each
-- bid above its reserve, or NULL when none is.
SELECT A.id, A.reserve, B.bidder, B.price
FROM bid B RIGHT JOIN auction A ON A.id = B.auction AND B.price > A.reserve;
