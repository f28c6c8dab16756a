-- An interval join: the bids of each auction's first two seconds (both sides' event times
-- bound each other, so each side's rows are dropped once the watermark passes their reach).
SELECT A.id, A.seller, B.bidder, B.price
FROM auction A JOIN bid B
  ON A.id = B.auction AND B.`dateTime` BETWEEN A.`dateTime` AND A.`dateTime` + INTERVAL '2' SECOND;
