-- Nexmark q2 (selection): bids on a few auctions.
INSERT INTO sink_q2 SELECT auction, price FROM bid WHERE MOD(auction, 123) = 0;
