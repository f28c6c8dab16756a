-- Unbounded GROUP BY auction with COUNT and MAX: a retract changelog.
INSERT INTO sink_group_by SELECT auction, COUNT(*), MAX(price) FROM bid GROUP BY auction;
