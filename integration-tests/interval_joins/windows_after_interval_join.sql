-- The output of an interval join keeps the left input's event time: windows can follow.
WITH joined AS (
  SELECT B.`dateTime`, B.price
  FROM bid B JOIN auction A
    ON A.id = B.auction AND B.`dateTime` BETWEEN A.`dateTime` AND A.`dateTime` + INTERVAL '3' SECOND
)
SELECT window_start, window_end, COUNT(*) AS bids, MAX(price) AS top
FROM TABLE(TUMBLE(TABLE joined, DESCRIPTOR(`dateTime`), INTERVAL '10' SECOND))
GROUP BY window_start, window_end;
