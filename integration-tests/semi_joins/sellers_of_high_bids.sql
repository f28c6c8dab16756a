-- Sellers with an auction that got a bid at ten times its initial bid (EXISTS with a
-- condition beyond the keys, over an updating input: the best bid per auction).
SELECT A.seller, A.id, A.initialBid
FROM auction A
WHERE EXISTS (
  SELECT * FROM (SELECT auction, MAX(price) AS best FROM bid GROUP BY auction) B
  WHERE B.auction = A.id AND B.best > 10 * A.initialBid);
