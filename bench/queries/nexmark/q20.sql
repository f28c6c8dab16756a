-- Nexmark q20 (expand bid with auction): bids on category-10 auctions, each with its
-- auction's columns. A regular join.
INSERT INTO sink_q20
SELECT auction, bidder, price, channel, url, B.`dateTime`, B.extra,
  itemName, description, initialBid, reserve, A.`dateTime`, expires, seller, category, A.extra
FROM bid AS B
JOIN auction AS A ON B.auction = A.id
WHERE A.category = 10;
