-- The bids of each auction's first 10 seconds, with the auction's seller: an interval join,
-- both sides' rows dropped once the watermark puts them out of the other's reach (issue
-- 35's interval join on either state backend; not one of the Nexmark suite's).
INSERT INTO sink_interval_join
SELECT A.id, A.seller, B.bidder, B.price
FROM auction A JOIN bid B
  ON A.id = B.auction
  AND B.`dateTime` BETWEEN A.`dateTime` AND A.`dateTime` + INTERVAL '10' SECOND;
