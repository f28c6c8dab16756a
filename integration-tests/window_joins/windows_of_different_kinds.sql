-- Windows of different kinds: bids in 10-second windows sliding every 5 seconds and
-- auctions in 10-second tumbling windows, joined on bounds both kinds can have.
SELECT B.auction, B.price, A.seller, B.window_start, B.window_end
FROM (SELECT * FROM TABLE(HOP(TABLE bid, DESCRIPTOR(`dateTime`), INTERVAL '5' SECOND, INTERVAL '10' SECOND))) B
JOIN (SELECT * FROM TABLE(TUMBLE(TABLE auction, DESCRIPTOR(`dateTime`), INTERVAL '10' SECOND))) A
  ON B.auction = A.id AND B.window_start = A.window_start AND B.window_end = A.window_end;
