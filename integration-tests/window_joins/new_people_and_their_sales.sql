-- Per cumulating window (2-second steps up to 10 seconds): each seller's auctions so far,
-- with the seller's registration when it fell in the same window (a RIGHT window join of
-- a window TVF and a window aggregate).
SELECT P.id, P.name, A.seller, A.auctions, A.window_start, A.window_end
FROM (SELECT * FROM TABLE(CUMULATE(TABLE person, DESCRIPTOR(`dateTime`), INTERVAL '2' SECOND, INTERVAL '10' SECOND))) P
RIGHT JOIN (
  SELECT seller, COUNT(*) AS auctions, window_start, window_end
  FROM TABLE(CUMULATE(TABLE auction, DESCRIPTOR(`dateTime`), INTERVAL '2' SECOND, INTERVAL '10' SECOND))
  GROUP BY seller, window_start, window_end) A
ON P.id = A.seller AND P.window_start = A.window_start AND P.window_end = A.window_end;
