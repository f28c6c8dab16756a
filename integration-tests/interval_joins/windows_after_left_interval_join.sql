-- Windows over a LEFT interval join's time attribute (the bids', kept by the output). An
-- auction joins the bids of the 3 seconds before it, and a bid that joined none is padded
-- once it is out of reach: either comes well after the watermark has passed the bid's
-- time, so the join holds its output watermark back (as Flink does) and no row is late
-- for the 1-second windows after it.
WITH joined AS (
  SELECT B.`dateTime`, B.price, A.seller
  FROM bid B LEFT JOIN auction A
    ON A.id = B.auction AND A.`dateTime` BETWEEN B.`dateTime` AND B.`dateTime` + INTERVAL '3' SECOND
)
SELECT window_start, window_end, COUNT(*) AS bids, COUNT(seller) AS with_auction, MAX(price) AS top
FROM TABLE(TUMBLE(TABLE joined, DESCRIPTOR(`dateTime`), INTERVAL '1' SECOND))
GROUP BY window_start, window_end;
