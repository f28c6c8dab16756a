-- Nexmark q9 (winning bids): every auction with its winning bid, the highest bid made while
-- it was open (the earliest of equal ones). A join, then a Top-1 per auction.
INSERT INTO sink_q9
SELECT id, itemName, description, initialBid, reserve, `dateTime`, expires, seller, category,
  extra, auction, bidder, price, bid_dateTime, bid_extra
FROM (
  SELECT A.*, B.auction, B.bidder, B.price, B.`dateTime` AS bid_dateTime, B.extra AS bid_extra,
    ROW_NUMBER() OVER (PARTITION BY A.id ORDER BY B.price DESC, B.`dateTime` ASC) AS rownum
  FROM auction A, bid B
  WHERE A.id = B.auction AND B.`dateTime` BETWEEN A.`dateTime` AND A.expires
)
WHERE rownum <= 1;
