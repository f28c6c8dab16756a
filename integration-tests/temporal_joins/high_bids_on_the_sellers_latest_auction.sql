-- Bids above the reserve of their bidder's latest auction at the bid's time (a temporal
-- join with a condition beyond the key).
SELECT B.auction, B.price, S.id, S.reserve
FROM bid B
JOIN seller_latest_auction FOR SYSTEM_TIME AS OF B.`dateTime` AS S
  ON B.bidder = S.seller AND B.price > S.reserve;
