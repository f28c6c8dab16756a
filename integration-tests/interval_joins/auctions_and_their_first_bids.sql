-- Each auction with the bids of its first two seconds, or alone (padded with NULLs) when
-- none came: a LEFT interval join, its padded rows emitted when the auction expires.
SELECT A.id, A.seller, B.bidder, B.price
FROM auction A
LEFT JOIN bid B
  ON A.id = B.auction AND B.`dateTime` BETWEEN A.`dateTime` AND A.`dateTime` + INTERVAL '2' SECOND;
