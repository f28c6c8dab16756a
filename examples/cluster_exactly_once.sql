-- Per-auction bid counts, exactly once into PostgreSQL, for the docker-compose cluster of
-- deploy/ (the address `postgres` is the compose service). Create the table first:
--   docker-compose -f deploy/docker-compose.yml exec postgres \
--     psql -h 127.0.0.1 -U postgres -c 'CREATE TABLE bids_per_auction (auction BIGINT PRIMARY KEY, bids BIGINT, top_price BIGINT)'
-- then: eddy submit --jobmanager http://127.0.0.1:6123 examples/cluster_exactly_once.sql
SET 'execution.checkpointing.interval' = '1s';
SET 'parallelism.default' = '2';

CREATE TABLE bid (auction BIGINT, bidder BIGINT, price BIGINT)
  WITH ('connector' = 'nexmark', 'nexmark.table' = 'bid', 'events.num' = '2000000',
        'events.rate' = '20000');

CREATE TABLE bids_per_auction (auction BIGINT, bids BIGINT, top_price BIGINT,
  PRIMARY KEY (auction) NOT ENFORCED)
  WITH ('connector' = 'postgres', 'url' = 'postgres://postgres@postgres:5432/postgres',
        'table' = 'bids_per_auction', 'sink.delivery-guarantee' = 'exactly-once');

INSERT INTO bids_per_auction SELECT auction, COUNT(*), MAX(price) FROM bid GROUP BY auction;
