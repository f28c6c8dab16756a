-- Nexmark q10 (log to file system): every bid with its day and minute, as a job writing
-- bids into partitioned files computes them.
INSERT INTO sink_q10
SELECT auction, bidder, price, `dateTime`, extra,
  DATE_FORMAT(`dateTime`, 'yyyy-MM-dd'), DATE_FORMAT(`dateTime`, 'HH:mm')
FROM bid;
