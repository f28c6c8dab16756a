-- Unbounded GROUP BY bidder with COUNT and SUM: a group per person who ever bid (issue 35's
-- state-larger-than-memory query; not one of the Nexmark suite's).
INSERT INTO sink_group_by_bidder SELECT bidder, COUNT(*), SUM(price) FROM bid GROUP BY bidder;
