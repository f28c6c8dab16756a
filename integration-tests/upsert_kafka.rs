//! upsert-kafka end to end: Eddy writes an updating aggregate (with rows leaving and
//! coming back, so deletes) to an upsert topic exactly once while TaskManagers are
//! SIGKILLed; the table the topic holds, read by a librdkafka consumer, equals the one a
//! failure-free run writes; and Eddy reads the topic back as a table (keys' last rows,
//! tombstones deleting) that equals it too, also under an aggregate that needs the
//! retractions the changelog normalization makes.

use std::collections::BTreeMap;

use crate::kafka::Broker;
use crate::processes::Cluster;
use crate::recovery::kill_while_running;
use crate::support::{Scratch, materialize, parse_changes, run_ok};

/// Bids per `auction % 40`, with their highest price, leaving while their count is a multiple
/// of 7: into upsert topic `topic`.
fn totals_job(broker: &Broker, topic: &str, events: u64) -> String {
    format!(
        "SET 'execution.checkpointing.interval' = '200ms';
         CREATE TABLE bid (auction BIGINT, price BIGINT) WITH ('connector' = 'nexmark',
           'nexmark.table' = 'bid', 'events.num' = '{events}', 'events.rate' = '25000');
         CREATE TABLE totals (k BIGINT, bids BIGINT, high BIGINT, PRIMARY KEY (k) NOT ENFORCED)
           WITH ('connector' = 'upsert-kafka', 'topic' = '{topic}',
           'properties.bootstrap.servers' = '{}', 'key.format' = 'json',
           'value.format' = 'json', 'sink.delivery-guarantee' = 'exactly-once');
         INSERT INTO totals SELECT k, bids, high FROM (
           SELECT auction % 40 AS k, COUNT(*) AS bids, MAX(price) AS high FROM bid
           GROUP BY auction % 40) WHERE bids % 7 <> 0;",
        broker.address
    )
}

/// The upsert table `totals` over `topic`, read to the offsets it has when the job starts.
fn upsert_source(broker: &Broker, topic: &str) -> String {
    format!(
        "CREATE TABLE totals (k BIGINT, bids BIGINT, high BIGINT, PRIMARY KEY (k) NOT ENFORCED)
           WITH ('connector' = 'upsert-kafka', 'topic' = '{topic}',
           'properties.bootstrap.servers' = '{}', 'key.format' = 'json',
           'value.format' = 'json', 'scan.bounded.mode' = 'latest-offset');",
        broker.address
    )
}

/// What a print sink's changes end with, each row joined by `,`.
fn printed_table(stdout: &str) -> Vec<String> {
    materialize(&parse_changes(stdout))
        .into_iter()
        .flat_map(|(row, n)| std::iter::repeat_n(row.join(","), n))
        .collect()
}

/// An upsert topic's table as rows `k,bids,high`.
fn topic_rows(table: &BTreeMap<String, String>) -> Vec<String> {
    let mut rows: Vec<String> = table
        .values()
        .map(|value| {
            let row: serde_json::Value = serde_json::from_str(value).unwrap();
            format!("{},{},{}", row["k"], row["bids"], row["high"])
        })
        .collect();
    rows.sort();
    rows
}

#[test]
fn an_upsert_topic_written_through_kills_reads_back_exactly() {
    let broker = Broker::start();
    broker.create_topic("totals", 3);
    broker.create_topic("reference", 3);
    let events = 150_000;

    let (_cluster, status) = kill_while_running(
        Cluster::start("upsert-kafka", 2, 2),
        &totals_job(&broker, "totals", events),
    );
    assert!(status["restarts"].as_u64().unwrap() >= 1, "{status}");
    let reference = Scratch::new("upsert-kafka-reference");
    run_ok(&reference, &totals_job(&broker, "reference", events), 2);
    let expected = broker.upsert_table("reference");
    assert!(
        expected.len() > 20,
        "most keys end with a row: {expected:?}"
    );
    // The reference topic holds the query's answer, computed apart into a print sink.
    let answer = format!(
        "CREATE TABLE bid (auction BIGINT, price BIGINT) WITH ('connector' = 'nexmark',
           'nexmark.table' = 'bid', 'events.num' = '{events}');
         CREATE TABLE answer (k BIGINT, bids BIGINT, high BIGINT) WITH ('connector' = 'print');
         INSERT INTO answer SELECT auction % 40, COUNT(*), MAX(price) FROM bid
         GROUP BY auction % 40;"
    );
    let output = run_ok(&reference, &answer, 2);
    let mut answer: Vec<String> = printed_table(&String::from_utf8_lossy(&output.stdout))
        .into_iter()
        .filter(|row| row.split(',').nth(1).unwrap().parse::<i64>().unwrap() % 7 != 0)
        .collect();
    answer.sort();
    assert_eq!(topic_rows(&expected), answer, "the reference topic's table");
    let written = broker.upsert_table("totals");
    assert_eq!(written, expected, "the topic's table after kills");
    let tombstones = broker
        .read_keyed("totals")
        .iter()
        .filter(|(_, _, _, value)| value.is_none())
        .count();
    assert!(tombstones > 0, "rows left and their keys got tombstones");

    // Eddy reads the topic back as a table, at parallelism 1 and 3.
    let expected_rows = topic_rows(&expected);
    let scratch = Scratch::new("upsert-kafka-read");
    for parallelism in [1, 3] {
        let script = format!(
            "{}
             CREATE TABLE mirror (k BIGINT, bids BIGINT, high BIGINT) WITH ('connector' = 'print');
             INSERT INTO mirror SELECT k, bids, high FROM totals;",
            upsert_source(&broker, "totals")
        );
        let output = run_ok(&scratch, &script, parallelism);
        let mut rows = printed_table(&String::from_utf8_lossy(&output.stdout));
        rows.sort();
        assert_eq!(
            rows, expected_rows,
            "read back at parallelism {parallelism}"
        );
    }

    // An aggregate over the upsert table takes back each key's replaced rows.
    let script = format!(
        "{}
         CREATE TABLE summary (n BIGINT, bids BIGINT) WITH ('connector' = 'print');
         INSERT INTO summary SELECT COUNT(*), SUM(bids) FROM totals;",
        upsert_source(&broker, "totals")
    );
    let output = run_ok(&scratch, &script, 2);
    let sum: i64 = expected
        .values()
        .map(|v| {
            serde_json::from_str::<serde_json::Value>(v).unwrap()["bids"]
                .as_i64()
                .unwrap()
        })
        .sum();
    assert_eq!(
        printed_table(&String::from_utf8_lossy(&output.stdout)),
        [format!("{},{sum}", expected.len())]
    );
}
