-- Nexmark q19 (auction top 10 price): the ten highest bids of every auction, with their
-- rank. A Top-N over an append-only stream.
INSERT INTO sink_q19
SELECT *
FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY auction ORDER BY price DESC) AS rank_number
  FROM bid
)
WHERE rank_number <= 10;
