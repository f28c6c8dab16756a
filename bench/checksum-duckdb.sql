-- group_by_bidder
SELECT COUNT(*), SUM(bidder), SUM(bids), SUM(total)
FROM (SELECT bidder, COUNT(*) AS bids, SUM(price) AS total FROM bid GROUP BY bidder);
-- q20
SELECT COUNT(*), SUM(b.auction), SUM(b.bidder), SUM(b.price)
FROM bid b JOIN auction a ON b.auction = a.id
WHERE a.category = 10;
-- q4 (Flink's AVG of a BIGINT is a BIGINT, the quotient truncated)
SELECT COUNT(*), SUM(category), SUM(avg_final)
FROM (
  SELECT category, SUM(final) // COUNT(final) AS avg_final
  FROM (
    SELECT MAX(b.price) AS final, a.category
    FROM auction a JOIN bid b ON a.id = b.auction
    WHERE b.dateTime BETWEEN a.dateTime AND a.expires
    GROUP BY a.id, a.category)
  GROUP BY category);
-- q9 (which of equal bids wins does not change the sums)
SELECT COUNT(*), SUM(id), SUM(price), SUM(reserve)
FROM (
  SELECT a.id, a.reserve, b.price,
    ROW_NUMBER() OVER (PARTITION BY a.id ORDER BY b.price DESC, b.dateTime) AS rownum
  FROM auction a JOIN bid b ON a.id = b.auction
  WHERE b.dateTime BETWEEN a.dateTime AND a.expires)
WHERE rownum = 1;
