-- An upsert-kafka source is followed by a ChangelogNormalize keyed by its primary key (in a
-- vertex hash-partitioned by it); its retractions feed the aggregate, whose updates go to an
-- upsert-kafka sink.
SET 'parallelism.default' = '2';
SET 'table.exec.state.ttl' = '1 h';
CREATE TABLE accounts (id BIGINT, owner STRING, balance BIGINT, PRIMARY KEY (id) NOT ENFORCED)
  WITH ('connector' = 'upsert-kafka', 'topic' = 'accounts',
        'properties.bootstrap.servers' = 'localhost:9092',
        'key.format' = 'json', 'value.format' = 'json');
CREATE TABLE wealth (owner STRING, total BIGINT, PRIMARY KEY (owner) NOT ENFORCED)
  WITH ('connector' = 'upsert-kafka', 'topic' = 'wealth',
        'properties.bootstrap.servers' = 'localhost:9092',
        'key.format' = 'json', 'value.format' = 'json');
INSERT INTO wealth SELECT owner, SUM(balance) FROM accounts WHERE balance > 0 GROUP BY owner;
