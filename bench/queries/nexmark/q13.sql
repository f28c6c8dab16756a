-- Nexmark q13 (bounded side input join): every bid joined with the side input's value for
-- its auction id modulo 10,000, looked up as of each bid's processing time (a lookup join
-- of a static file: the table is read whole and kept). The processing time is named
-- `proc_time` (the suite says `p_time`): the benchmark's `bid` already has a `p_time`.
INSERT INTO sink_q13
SELECT B.auction, B.bidder, B.price, B.`dateTime`, S.`value`
FROM (SELECT *, PROCTIME() AS proc_time FROM bid) B
JOIN side_input FOR SYSTEM_TIME AS OF B.proc_time AS S
ON mod(B.auction, 10000) = S.key;
