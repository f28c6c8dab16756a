-- Each bid with the latest auction its bidder had opened by the bid's time (versions of a
-- seller's row: every new auction replaces it), or NULLs when none (a LEFT temporal join).
SELECT B.auction, B.bidder, B.price, S.id, S.category
FROM bid B
LEFT JOIN seller_latest_auction FOR SYSTEM_TIME AS OF B.`dateTime` AS S
  ON B.bidder = S.seller;
