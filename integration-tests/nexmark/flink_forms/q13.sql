-- Nexmark q13 as Flink 2.3 can answer it. Its filesystem connector cannot be looked up
-- (Flink asks for a versioned table with a primary key), so Flink answers the regular join
-- of the bids with the static side input instead: over a table that never changes, the
-- same rows as the lookup join Eddy runs (bench/queries/nexmark/q13.sql).
SELECT B.auction, B.bidder, B.price, B.`dateTime`, S.`value`
FROM bid B
JOIN side_input S
ON mod(B.auction, 10000) = S.key;
