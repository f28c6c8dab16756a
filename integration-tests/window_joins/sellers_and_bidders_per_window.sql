-- Per 10-second window sliding every 5 seconds: the auctions each person opened and the
-- bids they made, a FULL window join of two window aggregates (a person active on one
-- side only has the other side's columns NULL).
SELECT S.seller, S.auctions, B.bidder, B.bids, S.window_end, B.window_end
FROM (
  SELECT seller, COUNT(*) AS auctions, window_start, window_end
  FROM TABLE(HOP(TABLE auction, DESCRIPTOR(`dateTime`), INTERVAL '5' SECOND, INTERVAL '10' SECOND))
  GROUP BY seller, window_start, window_end) S
FULL JOIN (
  SELECT bidder, COUNT(*) AS bids, window_start, window_end
  FROM TABLE(HOP(TABLE bid, DESCRIPTOR(`dateTime`), INTERVAL '5' SECOND, INTERVAL '10' SECOND))
  GROUP BY bidder, window_start, window_end) B
ON S.seller = B.bidder AND S.window_start = B.window_start AND S.window_end = B.window_end;
