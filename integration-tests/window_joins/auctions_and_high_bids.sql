-- Auctions with the bids made on them in the same 10-second window at more than twice the
-- initial bid (a LEFT window join with a condition beyond the keys): an auction without
-- such a bid comes once, padded with NULLs.
SELECT A.id, A.initialBid, B.price, A.window_end
FROM (SELECT * FROM TABLE(TUMBLE(TABLE auction, DESCRIPTOR(`dateTime`), INTERVAL '10' SECOND))) A
LEFT JOIN (SELECT * FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(`dateTime`), INTERVAL '10' SECOND))) B
  ON A.id = B.auction AND A.window_start = B.window_start AND A.window_end = B.window_end
  AND B.price > 2 * A.initialBid;
