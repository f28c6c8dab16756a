-- Nexmark q18 (last bid): for every bidder and auction, the bidder's latest bid on it.
-- A deduplication keeping the last row by event time.
INSERT INTO sink_q18
SELECT auction, bidder, price, channel, url, `dateTime`, extra
FROM (
  SELECT *,
    ROW_NUMBER() OVER (PARTITION BY bidder, auction ORDER BY `dateTime` DESC) AS rank_number
  FROM bid
)
WHERE rank_number <= 1;
