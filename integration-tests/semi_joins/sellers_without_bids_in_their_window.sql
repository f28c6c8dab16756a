-- Per 10-second window: sellers who made no bid in the window they sold in (a window anti
-- join: NOT EXISTS with both window bounds equated).
SELECT A.seller, A.auctions, A.window_end
FROM (
  SELECT seller, COUNT(*) AS auctions, window_start, window_end
  FROM TABLE(TUMBLE(TABLE auction, DESCRIPTOR(`dateTime`), INTERVAL '10' SECOND))
  GROUP BY seller, window_start, window_end) A
WHERE NOT EXISTS (
  SELECT *
  FROM (SELECT * FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(`dateTime`), INTERVAL '10' SECOND))) B
  WHERE B.bidder = A.seller AND A.window_start = B.window_start AND A.window_end = B.window_end);
