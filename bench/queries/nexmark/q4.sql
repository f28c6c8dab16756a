-- Nexmark q4 (average price per category): each closed auction's winning (highest) bid,
-- averaged per category. A join of auctions with the bids made while they were open, then
-- two unbounded GROUP BYs.
INSERT INTO sink_q4
SELECT Q.category, AVG(Q.final)
FROM (
  SELECT MAX(B.price) AS final, A.category
  FROM auction A, bid B
  WHERE A.id = B.auction AND B.`dateTime` BETWEEN A.`dateTime` AND A.expires
  GROUP BY A.id, A.category
) Q
GROUP BY Q.category;
