-- A FULL JOIN of two aggregates (updating inputs): sellers and bidders by person id, each
-- with its count; a person only one of them has the other side NULL.
SELECT S.seller, S.auctions, B.bidder, B.bids
FROM (SELECT seller, COUNT(*) AS auctions FROM auction GROUP BY seller) S
FULL JOIN (SELECT bidder, COUNT(*) AS bids FROM bid GROUP BY bidder) B
  ON S.seller = B.bidder;
