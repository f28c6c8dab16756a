//! Metadata columns of Kafka tables: each record's partition, offset, timestamp and
//! timestamp type, and what a change message states (`value.source.table`, ...), read
//! beside the rows of a changelog and of a plain topic. Flink reads format metadata only
//! through its Kafka connector, which this machine has no jar of, so the expected rows are
//! written out by hand from the records produced (their offsets read back from the broker).

use std::time::Duration;

use rdkafka::producer::{BaseRecord, Producer};

use crate::kafka::Broker;
use crate::support::{Scratch, eddy, parse_changes, run_ok};

/// Produces `(partition, timestamp, value)` records in order (`None`: a tombstone).
fn produce(broker: &Broker, topic: &str, records: &[(i32, i64, Option<&str>)]) {
    let keyed: Vec<(i32, i64, Option<&str>, Option<&str>)> = records
        .iter()
        .map(|(partition, timestamp, value)| (*partition, *timestamp, None, *value))
        .collect();
    produce_keyed(broker, topic, &keyed);
}

/// Produces `(partition, timestamp, key, value)` records in order.
fn produce_keyed(broker: &Broker, topic: &str, records: &[(i32, i64, Option<&str>, Option<&str>)]) {
    let producer = broker.producer();
    for (partition, timestamp, key, value) in records {
        let mut record = BaseRecord::<str, str>::to(topic)
            .partition(*partition)
            .timestamp(*timestamp);
        if let Some(key) = key {
            record = record.key(*key);
        }
        if let Some(value) = value {
            record = record.payload(*value);
        }
        producer.send(record).map_err(|(e, _)| e).unwrap();
    }
    producer.flush(Duration::from_secs(30)).unwrap();
}

/// The printed changes of sink `name` (`name> +I[...]` lines), sorted.
fn printed(stdout: &str, name: &str) -> Vec<String> {
    let prefix = format!("{name}> ");
    let lines: String = stdout
        .lines()
        .filter(|l| l.starts_with(&prefix))
        .map(|l| format!("{l}\n"))
        .collect();
    let mut changes: Vec<String> = parse_changes(&lines)
        .into_iter()
        .map(|c| format!("{}[{}]", c.op, c.fields.join(", ")))
        .collect();
    changes.sort();
    changes
}

const UPDATE_OVER_LINES: &str = r#"{
  "before": {"id": 1, "name": "a"},
  "after": {"id": 1, "name": "b"},
  "op": "u", "ts_ms": 1700000001000,
  "source": {"db": "shop", "table": "customers", "ts_ms": "1700000000900"}
}"#;

#[test]
fn rows_carry_their_records_and_messages_metadata() {
    let broker = Broker::start();
    broker.create_topic("changes", 2);
    broker.create_topic("plain", 1);
    produce(
        &broker,
        "changes",
        &[
            (
                0,
                1_600_000_000_000,
                Some(
                    r#"{"before":null,"after":{"id":1,"name":"a"},"op":"c","ts_ms":1700000000123,"source":{"db":"shop","schema":"public","table":"customers","ts_ms":1700000000100}}"#,
                ),
            ),
            (0, 1_600_000_001_000, Some(UPDATE_OVER_LINES)),
            (0, 1_600_000_002_000, None),
            (
                0,
                1_600_000_003_000,
                Some(r#"{"before":{"id":1,"name":"b"},"after":null,"op":"d","source":null}"#),
            ),
            (
                1,
                1_600_000_004_000,
                Some(
                    r#"{"before":null,"after":{"id":7,"name":"z"},"op":"r","source":{"db":"inventory","table":"orders"}}"#,
                ),
            ),
            (
                1,
                1_600_000_005_000,
                Some(r#"{"op":"c","after":{"id":"not a number"}}"#),
            ),
            (
                1,
                1_600_000_006_000,
                Some(
                    r#"{"before":null,"after":{"id":8,"name":"y"},"op":"c","ts_ms":"1700000002000"}"#,
                ),
            ),
        ],
    );
    produce(
        &broker,
        "plain",
        &[
            (0, 1_600_000_007_000, Some(r#"{"id":3}"#)),
            (0, 1_600_000_008_000, None),
            (0, 1_600_000_009_000, Some(r#"{"id":4}"#)),
        ],
    );
    broker.create_topic("upserts", 1);
    produce_keyed(
        &broker,
        "upserts",
        &[
            (
                0,
                1_600_000_010_000,
                Some(r#"{"id":1}"#),
                Some(r#"{"id":1,"name":"a"}"#),
            ),
            (
                0,
                1_600_000_011_000,
                Some(r#"{"id":2}"#),
                Some(r#"{"id":2,"name":"q"}"#),
            ),
            (
                0,
                1_600_000_012_000,
                Some(r#"{"id":1}"#),
                Some(r#"{"id":1,"name":"b"}"#),
            ),
            (0, 1_600_000_013_000, Some(r#"{"id":2}"#), None),
        ],
    );
    let scratch = Scratch::new("kafka-metadata");
    let script = format!(
        "CREATE TABLE changes (
           id BIGINT, name STRING,
           tbl STRING METADATA FROM 'value.source.table' VIRTUAL,
           db STRING METADATA FROM 'value.source.database' VIRTUAL,
           sch STRING METADATA FROM 'value.source.schema' VIRTUAL,
           ingested TIMESTAMP_LTZ(3) METADATA FROM 'value.ingestion-timestamp' VIRTUAL,
           happened TIMESTAMP_LTZ(3) METADATA FROM 'value.source.timestamp' VIRTUAL,
           part INT METADATA FROM 'partition' VIRTUAL,
           `offset` BIGINT METADATA VIRTUAL,
           kts TIMESTAMP_LTZ(3) METADATA FROM 'timestamp' VIRTUAL,
           kind STRING METADATA FROM 'timestamp-type' VIRTUAL,
           topic STRING METADATA VIRTUAL
         ) WITH ('connector' = 'kafka', 'topic' = 'changes',
           'properties.bootstrap.servers' = '{address}', 'format' = 'debezium-json',
           'debezium-json.ignore-parse-errors' = 'true', 'scan.bounded.mode' = 'latest-offset');
         CREATE TABLE plain (id BIGINT, pos BIGINT METADATA FROM 'offset' VIRTUAL)
           WITH ('connector' = 'kafka', 'topic' = 'plain', 'format' = 'json',
           'properties.bootstrap.servers' = '{address}', 'scan.bounded.mode' = 'latest-offset');
         CREATE TABLE upserts (id BIGINT, name STRING, pos BIGINT METADATA FROM 'offset' VIRTUAL,
           PRIMARY KEY (id) NOT ENFORCED)
           WITH ('connector' = 'upsert-kafka', 'topic' = 'upserts', 'key.format' = 'json',
           'value.format' = 'json', 'properties.bootstrap.servers' = '{address}',
           'scan.bounded.mode' = 'latest-offset');
         CREATE TABLE upserts_seen (id BIGINT, name STRING, pos BIGINT)
           WITH ('connector' = 'print', 'print-identifier' = 'upserts');
         INSERT INTO upserts_seen SELECT * FROM upserts;
         CREATE TABLE seen (id BIGINT, name STRING, tbl STRING, db STRING, sch STRING,
           ingested TIMESTAMP_LTZ(3), happened TIMESTAMP_LTZ(3), part INT, pos BIGINT,
           kts TIMESTAMP_LTZ(3), kind STRING, topic STRING)
           WITH ('connector' = 'print', 'print-identifier' = 'seen');
         CREATE TABLE plain_seen (id BIGINT, pos BIGINT)
           WITH ('connector' = 'print', 'print-identifier' = 'plain');
         INSERT INTO seen SELECT * FROM changes;
         INSERT INTO plain_seen SELECT * FROM plain;",
        address = broker.address
    );
    let output = run_ok(&scratch, &script, 1);
    // The print sink shows values as Flink's does: TIMESTAMP_LTZ as an instant, NULL as
    // `null`.
    let stdout = String::from_utf8_lossy(&output.stdout);
    let customers = "customers, shop";
    assert_eq!(
        printed(&stdout, "seen"),
        [
            format!("+I[1, a, {customers}, public, 2023-11-14T22:13:20.123Z, 2023-11-14T22:13:20.100Z, 0, 0, 2020-09-13T12:26:40Z, CreateTime, changes]"),
            "+I[7, z, orders, inventory, null, null, null, 1, 0, 2020-09-13T12:26:44Z, CreateTime, changes]".into(),
            "+I[8, y, null, null, null, 2023-11-14T22:13:22Z, null, 1, 2, 2020-09-13T12:26:46Z, CreateTime, changes]".into(),
            format!("+U[1, b, {customers}, null, 2023-11-14T22:13:21Z, 2023-11-14T22:13:20.900Z, 0, 1, 2020-09-13T12:26:41Z, CreateTime, changes]"),
            "-D[1, b, null, null, null, null, null, 0, 3, 2020-09-13T12:26:43Z, CreateTime, changes]".into(),
            format!("-U[1, a, {customers}, null, 2023-11-14T22:13:21Z, 2023-11-14T22:13:20.900Z, 0, 1, 2020-09-13T12:26:41Z, CreateTime, changes]"),
        ]
    );
    assert_eq!(printed(&stdout, "plain"), ["+I[3, 0]", "+I[4, 2]"]);
    // Each key's previous row is retracted whole, its metadata with it (Flink's
    // ChangelogNormalize).
    assert_eq!(
        printed(&stdout, "upserts"),
        [
            "+I[1, a, 0]",
            "+I[2, q, 1]",
            "+U[1, b, 2]",
            "-D[2, q, 1]",
            "-U[1, a, 0]"
        ]
    );
}

/// Keys Flink offers whose values Eddy cannot hold, and keys nobody offers, are refused by
/// name before the job starts.
#[test]
fn metadata_eddy_cannot_read_is_refused_by_name() {
    let scratch = Scratch::new("kafka-metadata-refused");
    let cases = [
        (
            "h STRING METADATA FROM 'headers'",
            "debezium-json",
            "'headers' is MAP<STRING, BYTES>",
        ),
        (
            "p STRING METADATA FROM 'value.source.properties'",
            "debezium-json",
            "'value.source.properties' is MAP<STRING, STRING>",
        ),
        (
            "k STRING METADATA FROM 'value.pk-names'",
            "canal-json",
            "'value.pk-names' is ARRAY<STRING>",
        ),
        ("e INT METADATA FROM 'leader-epoch'", "json", "leader epoch"),
        (
            "t STRING METADATA FROM 'value.table'",
            "json",
            "has no metadata 'value.table'",
        ),
        ("t STRING METADATA FROM 'value.table'", "maxwell-json", ""),
    ];
    for (column, format, expected) in cases {
        let script = format!(
            "CREATE TABLE t (id BIGINT, {column}) WITH ('connector' = 'kafka', 'topic' = 'x',
               'properties.bootstrap.servers' = '127.0.0.1:9', 'format' = '{format}');
             CREATE TABLE o (id BIGINT) WITH ('connector' = 'blackhole');
             INSERT INTO o SELECT id FROM t;"
        );
        let file = scratch.write("refused.sql", &script);
        let output = eddy().arg("explain").arg(&file).output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        match expected {
            "" => assert!(output.status.success(), "{column} ({format}): {stderr}"),
            _ => assert!(
                !output.status.success() && stderr.contains(expected),
                "{column} ({format}): {stderr}"
            ),
        }
    }
}
