-- Bids on auctions opened in the same 10-second window: a window join of two window TVFs
-- on the auction id and both window bounds.
SELECT B.auction, B.bidder, B.price, A.seller, B.window_start, B.window_end
FROM (SELECT * FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(`dateTime`), INTERVAL '10' SECOND))) B
JOIN (SELECT * FROM TABLE(TUMBLE(TABLE auction, DESCRIPTOR(`dateTime`), INTERVAL '10' SECOND))) A
  ON B.auction = A.id AND B.window_start = A.window_start AND B.window_end = A.window_end;
