//! End-to-end exactly-once under chaos: a JobManager and TaskManagers as real processes,
//! a real PostgreSQL server, S3-compatible server and Kafka-protocol broker, and a
//! deterministic job
//! writing through two-phase-commit sinks while processes are SIGKILLed at random moments,
//! and aborted by failpoints right after a checkpoint completes, before the sinks commit.
//! What readers see at the end must equal a failure-free run exactly.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::faults::FaultyProxy;
use crate::iceberg::{RUST_READER, iceberg_options, pyiceberg_catalog};
use crate::kafka::Broker;
use crate::postgres::Postgres;
use crate::processes::Cluster;
use crate::recovery::{next, seeded};
use crate::s3::S3Server;
use crate::security::{Credentials, secured_cluster};
use crate::support::{exclusive, python, run_ok};

const BUCKET: &str = "eddy";
const EVENTS: u64 = 300_000;

/// The external systems.
pub struct Systems {
    pub pg: Postgres,
    pub s3: S3Server,
    pub kafka: Broker,
    /// A proxy the job reaches S3 through, to inject faults, if any.
    pub s3_proxy: Option<FaultyProxy>,
    /// More options of the job's Kafka table (`, 'key' = 'value'`…).
    pub kafka_options: String,
}

impl Systems {
    /// Starts them, named after `name`.
    pub fn start(name: &str) -> Systems {
        Systems {
            pg: Postgres::start(name),
            s3: S3Server::start(BUCKET),
            kafka: Broker::start(),
            s3_proxy: None,
            kafka_options: String::new(),
        }
    }

    /// The job's options of its S3 table: through the proxy when there is one.
    pub fn s3_options(&self) -> String {
        match &self.s3_proxy {
            Some(proxy) => self.s3.options_at(&proxy.endpoint),
            None => self.s3.options(),
        }
    }
}

/// The job: a retracting two-level GROUP BY, an upsert GROUP BY, a Top-N over the bids and
/// a deduplication keeping each bidder's last bid into PostgreSQL, and an append stream into
/// PostgreSQL, into CSV and Parquet files and an Iceberg table (partitioned by channel) on
/// S3 and into a Kafka topic, the per-auction upserts also into an Iceberg table with a
/// primary key (equality and position deletes), all named after `name`. The cheap bids
/// into PostgreSQL go through a Python function (its module in [`python_module`]'s
/// directory). (One event per millisecond: no bidder bids twice at one time, so the last
/// bid is one bid.)
pub fn job(name: &str, events: u64, rate: u64, guarantee: &str, systems: &Systems) -> String {
    let with_pg = |table: &str| {
        systems
            .pg
            .sink_options(&format!("{name}_{table}"), guarantee)
    };
    format!(
        "SET 'execution.checkpointing.interval' = '300ms';
         SET 'restart-strategy.exponential-delay.initial-backoff' = '200ms';
         SET 'restart-strategy.exponential-delay.max-backoff' = '200ms';
         SET 'python.files' = '{}';
         CREATE FUNCTION in_cents(price BIGINT, channel STRING) RETURNS BIGINT
           AS 'chaos_functions.in_cents' LANGUAGE PYTHON;
         CREATE TABLE bid (auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR,
           dateTime TIMESTAMP(3), WATERMARK FOR dateTime AS dateTime - INTERVAL '1' SECOND)
           WITH ('connector' = 'nexmark', 'nexmark.table' = 'bid', 'events.num' = '{events}',
           'events.rate' = '{rate}', 'nexmark.first-event-rate' = '1000');
         CREATE TABLE per_auction (auction BIGINT, bids BIGINT, top BIGINT,
           PRIMARY KEY (auction) NOT ENFORCED) WITH ({});
         CREATE TABLE per_count (bids BIGINT, auctions BIGINT,
           PRIMARY KEY (bids) NOT ENFORCED) WITH ({});
         CREATE TABLE top_bids (auction BIGINT, rn BIGINT, bidder BIGINT, price BIGINT,
           PRIMARY KEY (auction, rn) NOT ENFORCED) WITH ({});
         CREATE TABLE last_bid (bidder BIGINT, auction BIGINT, price BIGINT,
           PRIMARY KEY (bidder) NOT ENFORCED) WITH ({});
         CREATE TABLE cheap (auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR)
           WITH ({});
         CREATE TABLE cheap_files (auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR)
           WITH ('connector' = 'filesystem', 'path' = 's3://{BUCKET}/{name}', 'format' = 'csv',
           'sink.rolling-policy.file-size' = '20000', 'sink.delivery-guarantee' = '{guarantee}',
           {});
         CREATE TABLE cheap_parquet (auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR)
           WITH ('connector' = 'filesystem', 'path' = 's3://{BUCKET}/{name}-parquet',
           'format' = 'parquet', 'sink.rolling-policy.file-size' = '20000',
           'sink.delivery-guarantee' = '{guarantee}', {});
         CREATE TABLE cheap_iceberg (auction BIGINT, bidder BIGINT, price BIGINT,
           channel VARCHAR) PARTITIONED BY (channel) WITH ({}, {});
         CREATE TABLE per_auction_iceberg (auction BIGINT, bids BIGINT, top BIGINT,
           PRIMARY KEY (auction) NOT ENFORCED) WITH ({}, {});
         CREATE TABLE cheap_kafka (auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR)
           WITH ('connector' = 'kafka', 'topic' = '{name}-cheap', 'format' = 'csv',
           'properties.bootstrap.servers' = '{}', 'sink.delivery-guarantee' = '{guarantee}'{});
         INSERT INTO per_auction SELECT auction, COUNT(*), MAX(price) FROM bid GROUP BY auction;
         INSERT INTO per_count SELECT bids, COUNT(*)
           FROM (SELECT auction, COUNT(*) AS bids FROM bid GROUP BY auction) GROUP BY bids;
         INSERT INTO top_bids SELECT auction, rn, bidder, price FROM (SELECT auction, bidder,
           price, ROW_NUMBER() OVER (PARTITION BY auction ORDER BY price DESC, bidder) AS rn
           FROM bid) WHERE rn <= 3;
         INSERT INTO last_bid SELECT bidder, auction, price FROM (SELECT *, ROW_NUMBER()
           OVER (PARTITION BY bidder ORDER BY dateTime DESC) AS rn FROM bid) WHERE rn = 1;
         INSERT INTO cheap SELECT auction, bidder, in_cents(price, channel), channel FROM bid
           WHERE price < 1000;
         INSERT INTO cheap_files SELECT auction, bidder, price, channel FROM bid WHERE price < 1000;
         INSERT INTO cheap_parquet SELECT auction, bidder, price, channel FROM bid
           WHERE price < 1000;
         INSERT INTO cheap_iceberg SELECT auction, bidder, price, channel FROM bid
           WHERE price < 1000;
         INSERT INTO per_auction_iceberg SELECT auction, COUNT(*), MAX(price) FROM bid
           GROUP BY auction;
         INSERT INTO cheap_kafka SELECT auction, bidder, price, channel FROM bid WHERE price < 1000;",
        python_module(name).display(),
        with_pg("per_auction"),
        with_pg("per_count"),
        with_pg("top_bids"),
        with_pg("last_bid"),
        with_pg("cheap"),
        systems.s3_options(),
        systems.s3_options(),
        iceberg_options(
            &systems.pg,
            "lake",
            &format!("{name}_cheap"),
            &format!("s3://{BUCKET}/{name}-iceberg")
        ),
        systems.s3_options(),
        iceberg_options(
            &systems.pg,
            "lake",
            &format!("{name}_per_auction"),
            &format!("s3://{BUCKET}/{name}-iceberg")
        ),
        systems.s3_options(),
        systems.kafka.address,
        systems.kafka_options
    )
}

/// The Python function of [`job`] `name`, written into a directory of its own (which
/// names the job's workers on their command lines); returns the module's path.
pub fn python_module(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("eddy-udfs-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let module = dir.join("chaos_functions.py");
    std::fs::write(
        &module,
        "def in_cents(price, channel):\n    \
         return price * 100 + len(channel or '')\n",
    )
    .unwrap();
    module
}

/// The processes whose command line names `text`.
pub fn processes_naming(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        if String::from_utf8_lossy(&cmdline).contains(text) {
            found.push(entry.file_name().to_string_lossy().into_owned());
        }
    }
    found
}

/// Creates the tables and the topic [`job`] writes.
pub fn create_tables(systems: &Systems, name: &str) {
    systems.kafka.create_topic(&format!("{name}-cheap"), 2);
    systems.pg.execute(&format!(
        "CREATE TABLE {name}_per_auction (auction BIGINT PRIMARY KEY, bids BIGINT, top BIGINT);
         CREATE TABLE {name}_per_count (bids BIGINT PRIMARY KEY, auctions BIGINT);
         CREATE TABLE {name}_top_bids (auction BIGINT, rn BIGINT, bidder BIGINT, price BIGINT,
           PRIMARY KEY (auction, rn));
         CREATE TABLE {name}_last_bid (bidder BIGINT PRIMARY KEY, auction BIGINT, price BIGINT);
         CREATE TABLE {name}_cheap (auction BIGINT, bidder BIGINT, price BIGINT, channel TEXT);"
    ));
}

/// What readers see of one run: each table's rows (the Parquet files' as `cheap_parquet`,
/// read by pyarrow), the committed CSV files' lines and the topic's committed records,
/// sorted; and the names of hidden (uncommitted) files.
#[derive(Debug, PartialEq)]
pub struct Seen {
    pub tables: BTreeMap<&'static str, Vec<Vec<String>>>,
    pub file_lines: Vec<String>,
    pub hidden_files: Vec<String>,
    pub records: Vec<String>,
}

/// What readers see of the run named `name`.
pub fn seen(systems: &Systems, name: &str) -> Seen {
    let (pg, s3) = (&systems.pg, &systems.s3);
    let mut tables = BTreeMap::new();
    for (table, order) in [
        ("per_auction", "1"),
        ("per_count", "1"),
        ("top_bids", "1, 2"),
        ("last_bid", "1"),
        ("cheap", "1, 2, 3, 4"),
    ] {
        tables.insert(
            table,
            pg.query(&format!("SELECT * FROM {name}_{table} ORDER BY {order}")),
        );
    }
    let mut file_lines = Vec::new();
    let mut hidden_files = Vec::new();
    for (key, body) in s3.objects(BUCKET, &format!("{name}/")) {
        match key.rsplit('/').next().unwrap_or_default().starts_with('.') {
            true => hidden_files.push(key),
            false => file_lines.extend(body.lines().map(str::to_string)),
        }
    }
    file_lines.sort();
    let (parquet_rows, hidden_parquet) = s3.parquet_rows(BUCKET, &format!("{name}-parquet/"));
    tables.insert("cheap_parquet", parquet_rows);
    hidden_files.extend(hidden_parquet);
    let (iceberg_tables, orphans) = iceberg_rows(systems, name);
    tables.extend(iceberg_tables);
    hidden_files.extend(orphans);
    let topic = format!("{name}-cheap");
    let positioned = systems.kafka.read_committed_at(&topic);
    if let Some(dir) = std::env::var_os("EDDY_TEST_TOPIC_DUMP") {
        dump_topic(std::path::Path::new(&dir), &topic, &positioned);
    }
    let mut records: Vec<String> = positioned.into_iter().map(|(_, _, r)| r).collect();
    records.sort();
    Seen {
        tables,
        file_lines,
        hidden_files,
        records,
    }
}

/// A table's rows, each value as text.
type TableRows = Vec<Vec<String>>;

/// The rows of the Iceberg tables of the run `name`, each value as Python prints it,
/// sorted: `cheap_iceberg` as pyiceberg reads it, `per_auction_iceberg` (equality and
/// position deletes) as iceberg-rust does; and the files in their directories that their
/// metadata does not list (orphans).
fn iceberg_rows(systems: &Systems, name: &str) -> (Vec<(&'static str, TableRows)>, Vec<String>) {
    let s3 = format!(
        "{{'s3.endpoint': '{}', 's3.access-key-id': 'test', 's3.secret-access-key': 'test', \
         's3.region': 'us-east-1'}}",
        systems.s3.endpoint
    );
    let catalog = pyiceberg_catalog(&systems.pg, "", &format!(", **{s3}"));
    let printed = python(&format!(
        "import json{RUST_READER}
catalog = {catalog}
cheap = catalog.load_table('lake.{name}_cheap')
per_auction = catalog.load_table('lake.{name}_per_auction')
print(json.dumps({{
    'cheap': [[str(r[c]) for c in ('auction', 'bidder', 'price', 'channel')]
        for r in cheap.scan().to_arrow().to_pylist()],
    'per_auction': [[str(r[c]) for c in ('auction', 'bids', 'top')]
        for r in rust_rows(per_auction, {{**{s3}, 's3.path-style-access': 'true'}})],
    'files': [f for t in (cheap, per_auction)
        for f in t.inspect.files().column('file_path').to_pylist()]}}))"
    ));
    let read: serde_json::Value = serde_json::from_str(&printed).unwrap();
    let rows = |key: &str| {
        let mut rows: Vec<Vec<String>> = serde_json::from_value(read[key].clone()).unwrap();
        rows.sort();
        rows
    };
    let listed: Vec<String> = serde_json::from_value(read["files"].clone()).unwrap();
    let mut orphans = Vec::new();
    for table in ["cheap", "per_auction"] {
        let prefix = format!("{name}-iceberg/lake/{name}_{table}/data/");
        orphans.extend(
            systems
                .s3
                .keys(BUCKET, &prefix)
                .into_iter()
                .filter(|key| !listed.contains(&format!("s3://{BUCKET}/{key}"))),
        );
    }
    let tables = vec![
        ("cheap_iceberg", rows("cheap")),
        ("per_auction_iceberg", rows("per_auction")),
    ];
    (tables, orphans)
}

/// Writes a topic's records with their partitions and offsets to `{dir}/{topic}.txt`, one
/// per line in the order read (for finding where duplicates were written).
fn dump_topic(dir: &std::path::Path, topic: &str, records: &[(i32, i64, String)]) {
    use std::fmt::Write;
    let mut text = String::new();
    for (partition, offset, record) in records {
        let _ = writeln!(text, "{partition} {offset} {record}");
    }
    std::fs::create_dir_all(dir).unwrap();
    let path = dir.join(format!("{topic}.txt"));
    std::fs::write(&path, text).unwrap();
    eprintln!(
        "topic {topic}: {} records dumped to {}",
        records.len(),
        path.display()
    );
}

/// Runs the job failure-free on the embedded cluster.
pub fn failure_free(systems: &Systems, cluster: &Cluster, guarantee: &str) -> Seen {
    create_tables(systems, "reference");
    let script = job("reference", EVENTS, 0, guarantee, systems);
    run_ok(&cluster.scratch, &script, 2);
    seen(systems, "reference")
}

/// Runs the job on a JobManager and 3 TaskManagers while killing processes: TaskManagers by
/// SIGKILL at random moments, the JobManager and then the TaskManagers by failpoints right
/// after a checkpoint completes. With `credentials`, the cluster runs with TLS on every
/// connection and tokens. Returns the job's final status and the kills made.
fn run_with_chaos(
    name: &str,
    guarantee: &str,
    systems: &Systems,
    credentials: Option<&Credentials>,
) -> (Cluster, u64) {
    let mut rng = seeded();
    let jobmanager_crash = 4 + next(&mut rng) % 8;
    let taskmanager_crash = jobmanager_crash + 6 + next(&mut rng) % 8;
    let failpoints = format!(
        "jobmanager.before-notify={jobmanager_crash},taskmanager.before-commit={taskmanager_crash}"
    );
    eprintln!(
        "{name}: the JobManager aborts before notifying checkpoint {jobmanager_crash}, \
         TaskManagers before committing checkpoint {taskmanager_crash}"
    );
    let failpoints = [("EDDY_FAILPOINTS", failpoints.as_str())];
    let mut cluster = match credentials {
        Some(credentials) => secured_cluster(name, credentials, 3, 2, &failpoints),
        None => Cluster::start_with(name, 3, 2, &[], &failpoints),
    };
    // Only the first processes carry the failpoints: a replacement must not abort again.
    cluster.remove_env("EDDY_FAILPOINTS");
    create_tables(systems, name);
    let job_id = cluster.submit(&job(name, EVENTS, 15_000, guarantee, systems), 2);
    let mut kills = 0u64;
    let mut jobmanager_aborted = false;
    let mut replaced = vec![false; cluster.taskmanagers.len()];
    let mut next_kill = Instant::now() + Duration::from_millis(1500 + next(&mut rng) % 2000);
    let deadline = Instant::now() + Duration::from_secs(240);
    loop {
        assert!(Instant::now() < deadline, "the job did not finish in time");
        if cluster.jobmanager.child.try_wait().unwrap().is_some() {
            kills += 1;
            eprintln!("kill {kills}: the JobManager aborted at its failpoint; restarting it");
            jobmanager_aborted = true;
            cluster.restart_jobmanager();
        }
        for i in 0..cluster.taskmanagers.len() {
            if !replaced[i] && cluster.taskmanagers[i].child.try_wait().unwrap().is_some() {
                kills += 1;
                replaced[i] = true;
                eprintln!(
                    "kill {kills}: TaskManager {} ended (failpoint); replacing it",
                    i + 1
                );
                cluster.add_taskmanager(2);
                replaced.push(false);
            }
        }
        // One try: the JobManager may just have aborted at its failpoint, and the next
        // round restarts it.
        let Some(status) = cluster.try_status(&job_id) else {
            std::thread::sleep(Duration::from_millis(100));
            continue;
        };
        match status["state"].as_str().unwrap_or_default() {
            "FINISHED" => break,
            "FAILED" | "CANCELLED" => panic!("the job ended: {status}"),
            _ => {}
        }
        if kills < 6 && Instant::now() >= next_kill {
            // A TaskManager running some of the job's tasks. While none does (a restart
            // or an adoption under way), the kill waits: killing an idle TaskManager
            // restarts nothing.
            let busy = running_on(&status);
            let targets: Vec<usize> = (0..cluster.taskmanagers.len())
                .filter(|i| !replaced[*i] && busy.contains(i))
                .collect();
            if targets.is_empty() {
                std::thread::sleep(Duration::from_millis(100));
                continue;
            }
            let victim = targets[(next(&mut rng) as usize) % targets.len()];
            kills += 1;
            eprintln!(
                "kill {kills}: SIGKILL TaskManager {} (of those running tasks: {:?})",
                victim + 1,
                targets.iter().map(|i| i + 1).collect::<Vec<_>>()
            );
            cluster.taskmanagers[victim].child.kill().unwrap();
            let _ = cluster.taskmanagers[victim].child.wait();
            replaced[victim] = true;
            cluster.add_taskmanager(2);
            replaced.push(false);
            next_kill = Instant::now() + Duration::from_millis(1500 + next(&mut rng) % 2000);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        jobmanager_aborted,
        "the JobManager never reached its failpoint"
    );
    let status = cluster.status(&job_id);
    eprintln!(
        "{name}: {kills} kills, {} restarts, last restored from checkpoint {}",
        status["restarts"], status["restored_from"]
    );
    assert!(
        status["restarts"].as_u64().unwrap_or(0) >= 3,
        "the kills restarted the job fewer than 3 times: {}",
        status["restarts"]
    );
    (cluster, kills)
}

/// The TaskManagers (by start index) that run tasks of the job, from its status.
pub fn running_on(status: &serde_json::Value) -> Vec<usize> {
    let mut indices: Vec<usize> = status["vertices"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|v| v["subtasks"].as_array().into_iter().flatten())
        .filter_map(|t| {
            t["taskmanager"]
                .as_str()?
                .strip_prefix("tm-")?
                .parse::<usize>()
                .ok()
        })
        .map(|id| id - 1)
        .collect();
    indices.sort();
    indices.dedup();
    indices
}

#[test]
fn exactly_once_sinks_survive_chaos() {
    let _exclusive = exclusive();
    let systems = Systems::start("chaos");
    // With TLS on every connection (mutual between the daemons) and tokens.
    let credentials = Credentials::new();
    let (cluster, kills) = run_with_chaos("chaos", "exactly-once", &systems, Some(&credentials));
    assert!(
        kills >= 5,
        "only {kills} kills happened before the job finished"
    );
    let got = seen(&systems, "chaos");
    // The Python workers of SIGKILLed TaskManagers ended with them: none is left behind.
    let module = python_module("chaos").display().to_string();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !processes_naming(&module).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    let workers = processes_naming(&module);
    assert!(
        workers.is_empty(),
        "Python workers left running: {workers:?}"
    );
    let expected = failure_free(&systems, &cluster, "exactly-once");
    assert!(!expected.file_lines.is_empty() && !expected.tables["cheap"].is_empty());
    assert!(
        got.hidden_files.is_empty(),
        "uncommitted files: {:?}",
        got.hidden_files
    );
    for (table, rows) in &expected.tables {
        let differing: Vec<_> = difference(&got.tables[table], rows)
            .into_iter()
            .take(10)
            .collect();
        assert!(
            got.tables[table] == *rows,
            "table {table}: {} rows, {} expected; rows only on one side: {differing:?}",
            got.tables[table].len(),
            rows.len()
        );
    }
    let as_rows =
        |lines: &[String]| -> Vec<Vec<String>> { lines.iter().map(|l| vec![l.clone()]).collect() };
    let differing: Vec<_> = difference(&as_rows(&got.file_lines), &as_rows(&expected.file_lines))
        .into_iter()
        .take(10)
        .collect();
    assert!(
        got.file_lines == expected.file_lines,
        "files: {} lines, {} expected; lines only on one side: {differing:?}",
        got.file_lines.len(),
        expected.file_lines.len()
    );
    let differing: Vec<_> = difference(&as_rows(&got.records), &as_rows(&expected.records))
        .into_iter()
        .take(10)
        .collect();
    assert!(
        got.records == expected.records,
        "topic: {} records, {} expected; records only on one side: {differing:?}",
        got.records.len(),
        expected.records.len()
    );
    // The same rows in Parquet, as pyarrow reads them, as in CSV.
    let mut parquet_lines: Vec<String> = got.tables["cheap_parquet"]
        .iter()
        .map(|row| row.join(","))
        .collect();
    parquet_lines.sort();
    assert!(
        parquet_lines == got.file_lines,
        "the Parquet files' rows differ from the CSV files'"
    );
    // The same rows in the Iceberg table, as pyiceberg reads them, as in Parquet; the
    // per-auction upserts the same in Iceberg as in PostgreSQL.
    assert!(
        got.tables["cheap_iceberg"] == got.tables["cheap_parquet"],
        "the Iceberg table's rows differ from the Parquet files'"
    );
    let mut in_postgres = got.tables["per_auction"].clone();
    in_postgres.sort();
    assert!(
        got.tables["per_auction_iceberg"] == in_postgres,
        "the Iceberg per-auction table's rows differ from PostgreSQL's: {:?}",
        difference(&got.tables["per_auction_iceberg"], &in_postgres)
            .into_iter()
            .take(10)
            .collect::<Vec<_>>()
    );
    let prepared = systems.pg.query("SELECT gid FROM pg_prepared_xacts");
    assert!(
        prepared.is_empty(),
        "transactions left prepared: {prepared:?}"
    );
}

/// Rows in one of the sorted lists but not the other, marked `+` (only in `got`) or `-`.
pub fn difference(got: &[Vec<String>], expected: &[Vec<String>]) -> Vec<String> {
    let got_rows: Vec<String> = got.iter().map(|r| r.join(",")).collect();
    let expected_rows: Vec<String> = expected.iter().map(|r| r.join(",")).collect();
    let (have, want) = (multiset(&got_rows), multiset(&expected_rows));
    let mut out = Vec::new();
    for (row, n) in &have {
        if want.get(row) != Some(n) {
            out.push(format!("+{row} x{n}"));
        }
    }
    for (row, n) in &want {
        if have.get(row) != Some(n) {
            out.push(format!("-{row} x{n}"));
        }
    }
    out
}

/// Counts, per row, how often it occurs.
fn multiset(rows: &[String]) -> BTreeMap<&String, usize> {
    let mut counts = BTreeMap::new();
    for row in rows {
        *counts.entry(row).or_insert(0) += 1;
    }
    counts
}

#[test]
fn at_least_once_sinks_lose_nothing_under_chaos() {
    let _exclusive = exclusive();
    let systems = Systems::start("chaos-alo");
    let (cluster, kills) = run_with_chaos("alo", "at-least-once", &systems, None);
    assert!(
        kills >= 5,
        "only {kills} kills happened before the job finished"
    );
    let got = seen(&systems, "alo");
    let expected = failure_free(&systems, &cluster, "at-least-once");
    // Every bid changes its auction's count, so a replay rewrites every key it touches
    // and the per-auction upserts converge on the final values.
    assert!(
        got.tables["per_auction"] == expected.tables["per_auction"],
        "per-auction counts differ"
    );
    // Not so for an upsert fed by a retracting aggregate: a change the failed attempt
    // wrote can net out within one chunk of the replay, which then writes nothing for it.
    // At least once promises no loss, not this; the stale rows are counted.
    let stale = difference(&got.tables["per_count"], &expected.tables["per_count"]);
    eprintln!(
        "at-least-once, per_count: {} rows differ from the failure-free run (stale upserts)",
        stale.len()
    );
    let rows =
        |table: &[Vec<String>]| -> Vec<String> { table.iter().map(|r| r.join(",")).collect() };
    for (what, got, expected) in [
        (
            "cheap",
            rows(&got.tables["cheap"]),
            rows(&expected.tables["cheap"]),
        ),
        ("files", got.file_lines.clone(), expected.file_lines.clone()),
        (
            "parquet",
            rows(&got.tables["cheap_parquet"]),
            rows(&expected.tables["cheap_parquet"]),
        ),
        ("topic", got.records.clone(), expected.records.clone()),
    ] {
        let (have, want) = (multiset(&got), multiset(&expected));
        let missing = want
            .iter()
            .filter(|(row, n)| have.get(*row).is_none_or(|h| h < n))
            .count();
        assert_eq!(missing, 0, "{what}: {missing} rows lost");
        eprintln!(
            "at-least-once, {what}: {} rows, {} expected: {} duplicates",
            got.len(),
            expected.len(),
            got.len() - expected.len()
        );
    }
    // The Iceberg sink commits exactly once in any job that checkpoints.
    for table in ["cheap_iceberg", "per_auction_iceberg"] {
        assert!(
            got.tables[table] == expected.tables[table],
            "the Iceberg table {table} differs from the failure-free run's"
        );
    }
}
