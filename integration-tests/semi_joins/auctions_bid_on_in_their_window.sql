-- Auctions bid on within the 10-second window they were opened in (a window semi join:
-- IN with both window bounds equated).
SELECT A.id, A.seller, A.window_start, A.window_end
FROM (SELECT * FROM TABLE(TUMBLE(TABLE auction, DESCRIPTOR(`dateTime`), INTERVAL '10' SECOND))) A
WHERE A.id IN (
  SELECT B.auction
  FROM (SELECT * FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(`dateTime`), INTERVAL '10' SECOND))) B
  WHERE A.window_start = B.window_start AND A.window_end = B.window_end);
