-- Nexmark q0 (passthrough): every bid, unchanged.
INSERT INTO sink_q0 SELECT auction, bidder, price, `dateTime`, extra FROM bid;
