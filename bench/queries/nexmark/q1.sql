-- Nexmark q1 (currency conversion): prices from dollars to euros.
INSERT INTO sink_q1 SELECT auction, bidder, 0.908 * price AS price, `dateTime`, extra FROM bid;
