//! A Kafka-protocol broker on loopback (`noida-db`, from PyPI) and the kafka connector
//! against it. The broker is young, so what the tests rely on is checked here: records of
//! aborted and open transactions stay invisible to `read_committed` readers.

use std::collections::BTreeMap;
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rdkafka::ClientConfig;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::{Offset, TopicPartitionList};

use crate::processes::free_port;
use crate::support::{Scratch, run_ok, visible_lines};

const TIMEOUT: Duration = Duration::from_secs(30);

/// A broker on a free loopback port, stopped on drop.
pub struct Broker {
    child: Child,
    /// `127.0.0.1:PORT`.
    pub address: String,
    data: Scratch,
}

/// The `noida-db` binary inside its Python package.
fn binary() -> String {
    let output = Command::new("python3")
        .args([
            "-c",
            "import noida_db, os; print(os.path.join(os.path.dirname(noida_db.__file__), 'noida-db'))",
        ])
        .output()
        .expect("run python3");
    assert!(
        output.status.success(),
        "noida-db is not installed; `.ci/run` installs it, or: pip install noida-db==0.2.3"
    );
    String::from_utf8_lossy(&output.stdout).trim().to_string()
}

/// Starts the broker on `port` over `data`.
fn spawn(port: u16, data: &Scratch) -> Child {
    Command::new(binary())
        .args([
            "start",
            "--only",
            "kafka",
            "--kafka-port",
            &port.to_string(),
        ])
        .arg("--data-dir")
        .arg(data.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start noida-db")
}

impl Broker {
    /// Starts a broker with an empty data directory.
    pub fn start() -> Broker {
        let port = free_port();
        let data = Scratch::new("kafka-data");
        let child = spawn(port, &data);
        let broker = Broker {
            child,
            address: format!("127.0.0.1:{port}"),
            data,
        };
        broker.wait_until_up();
        broker
    }

    /// Stops the broker (SIGTERM) and starts it again on its port and data.
    ///
    /// noida-db 0.2.3 does not keep transactions across a restart: one open when it stops,
    /// or one begun later by a producer it knew before, is acknowledged at commit and then
    /// missing, its records or its offsets or both (see
    /// [`transactions_survive_broker_restarts`]). Tests of exactly-once delivery pause the
    /// broker instead.
    pub fn restart(&mut self) {
        crate::processes::signal(self.child.id(), "TERM");
        let _ = self.child.wait();
        let port = self.address.rsplit(':').next().unwrap().parse().unwrap();
        self.child = spawn(port, &self.data);
        self.wait_until_up();
    }

    /// Freezes the broker (SIGSTOP): its connections stay open and its requests unanswered
    /// until [`Broker::resume`].
    pub fn pause(&self) {
        crate::processes::signal(self.child.id(), "STOP");
    }

    /// Lets a paused broker go on.
    pub fn resume(&self) {
        crate::processes::signal(self.child.id(), "CONT");
    }

    fn wait_until_up(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while TcpStream::connect(&self.address).is_err() {
            assert!(Instant::now() < deadline, "the broker did not start");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn config(&self) -> ClientConfig {
        let mut config = ClientConfig::new();
        config.set("bootstrap.servers", &self.address);
        config
    }

    /// Creates a topic.
    pub fn create_topic(&self, name: &str, partitions: i32) {
        let admin: AdminClient<DefaultClientContext> = self.config().create().unwrap();
        let topic = NewTopic::new(name, partitions, TopicReplication::Fixed(1));
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let results = runtime
            .block_on(admin.create_topics([&topic], &AdminOptions::new()))
            .unwrap();
        for result in results {
            result.unwrap_or_else(|(topic, e)| panic!("creating topic {topic}: {e}"));
        }
    }

    /// A producer without transactions.
    pub fn producer(&self) -> BaseProducer {
        self.config().create().unwrap()
    }

    /// A transactional producer with id `id`, initialized.
    pub fn transactional_producer(&self, id: &str) -> BaseProducer {
        let producer: BaseProducer = self.config().set("transactional.id", id).create().unwrap();
        producer.init_transactions(TIMEOUT).unwrap();
        producer
    }

    /// Every record of a topic a `read_committed` consumer sees, as text, in no order.
    pub fn read_committed(&self, topic: &str) -> Vec<String> {
        self.read_committed_at(topic)
            .into_iter()
            .map(|(_, _, record)| record)
            .collect()
    }

    /// Every record of a topic a `read_committed` consumer sees, with its partition and
    /// offset.
    pub fn read_committed_at(&self, topic: &str) -> Vec<(i32, i64, String)> {
        self.read_keyed(topic)
            .into_iter()
            .map(|(partition, offset, _, value)| (partition, offset, value.unwrap_or_default()))
            .collect()
    }

    /// The table an upsert topic holds: each key's last value, keys whose last record is a
    /// tombstone left out (records are in offset order within their partition, and a key
    /// lives in one partition).
    pub fn upsert_table(&self, topic: &str) -> BTreeMap<String, String> {
        let mut table = BTreeMap::new();
        let mut records = self.read_keyed(topic);
        records.sort_by_key(|(partition, offset, _, _)| (*partition, *offset));
        for (_, _, key, value) in records {
            match value {
                Some(value) => table.insert(key, value),
                None => table.remove(&key),
            };
        }
        table
    }

    /// Every record a `read_committed` consumer sees: partition, offset, key (as text) and
    /// value (`None` for a tombstone).
    pub fn read_keyed(&self, topic: &str) -> Vec<(i32, i64, String, Option<String>)> {
        let consumer: BaseConsumer = self
            .config()
            .set("group.id", "eddy-tests")
            .set("enable.auto.commit", "false")
            .set("enable.partition.eof", "true")
            .set("isolation.level", "read_committed")
            .create()
            .unwrap();
        let metadata = consumer.fetch_metadata(Some(topic), TIMEOUT).unwrap();
        let partitions = metadata.topics()[0].partitions().len() as i32;
        let mut assignment = TopicPartitionList::new();
        for p in 0..partitions {
            assignment
                .add_partition_offset(topic, p, Offset::Beginning)
                .unwrap();
        }
        consumer.assign(&assignment).unwrap();
        let mut at_end = std::collections::HashSet::new();
        let mut records = Vec::new();
        let deadline = Instant::now() + TIMEOUT;
        while (at_end.len() as i32) < partitions {
            assert!(Instant::now() < deadline, "reading topic {topic} timed out");
            match consumer.poll(Duration::from_millis(100)) {
                None => {}
                Some(Ok(message)) => {
                    at_end.remove(&message.partition());
                    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
                    records.push((
                        message.partition(),
                        message.offset(),
                        text(message.key().unwrap_or_default()),
                        message.payload().map(text),
                    ));
                }
                Some(Err(KafkaError::PartitionEOF(p))) => {
                    at_end.insert(p);
                }
                Some(Err(e)) => panic!("reading topic {topic}: {e}"),
            }
        }
        records
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = &self.data;
    }
}

fn send_all(producer: &BaseProducer, topic: &str, lines: &[String]) {
    for line in lines {
        producer
            .send(BaseRecord::<(), str>::to(topic).payload(line))
            .unwrap();
    }
    producer.flush(TIMEOUT).unwrap();
}

fn sorted(mut lines: Vec<String>) -> Vec<String> {
    lines.sort();
    lines
}

#[test]
fn read_committed_hides_aborted_and_open_transactions() {
    let broker = Broker::start();
    broker.create_topic("orders", 3);
    let committed: Vec<String> = (0..300).map(|i| format!("{i},committed")).collect();
    let aborted: Vec<String> = (1000..1300).map(|i| format!("{i},aborted")).collect();
    let open: Vec<String> = (2000..2100).map(|i| format!("{i},open")).collect();
    let producer = broker.transactional_producer("test-writer");
    producer.begin_transaction().unwrap();
    send_all(&producer, "orders", &committed);
    producer.commit_transaction(TIMEOUT).unwrap();
    producer.begin_transaction().unwrap();
    send_all(&producer, "orders", &aborted);
    producer.abort_transaction(TIMEOUT).unwrap();
    producer.begin_transaction().unwrap();
    send_all(&producer, "orders", &open);

    // The broker itself: a read_committed consumer sees the committed records only.
    assert_eq!(
        sorted(broker.read_committed("orders")),
        sorted(committed.clone())
    );

    // Eddy's source, bounded at the offsets it finds at start, at parallelism 2.
    let scratch = Scratch::new("kafka-source");
    let out = scratch.path().join("out");
    let script = format!(
        "CREATE TABLE orders (id BIGINT, note VARCHAR) WITH ('connector' = 'kafka',
           'topic' = 'orders', 'properties.bootstrap.servers' = '{}', 'format' = 'csv',
           'scan.startup.mode' = 'earliest-offset', 'scan.bounded.mode' = 'latest-offset');
         CREATE TABLE out (id BIGINT, note VARCHAR) WITH ('connector' = 'filesystem',
           'path' = '{}', 'format' = 'csv');
         INSERT INTO out SELECT id, note FROM orders;",
        broker.address,
        out.display()
    );
    run_ok(&scratch, &script, 2);
    let read = visible_lines(&out);
    assert_eq!(sorted(read), sorted(committed));
    drop(producer);
}

/// Counts of each record.
fn counts(lines: &[String]) -> BTreeMap<&str, usize> {
    let mut counts = BTreeMap::new();
    for line in lines {
        *counts.entry(line.as_str()).or_insert(0) += 1;
    }
    counts
}

#[test]
fn the_kafka_sink_writes_exactly_once_with_checkpoints() {
    let broker = Broker::start();
    broker.create_topic("cheap", 2);
    let scratch = Scratch::new("kafka-sink");
    let files = scratch.path().join("files");
    let script = format!(
        "SET 'execution.checkpointing.interval' = '100ms';
         CREATE TABLE bid (auction BIGINT, price BIGINT) WITH ('connector' = 'nexmark',
           'nexmark.table' = 'bid', 'events.num' = '50000', 'events.rate' = '50000');
         CREATE TABLE cheap (auction BIGINT, price BIGINT) WITH ('connector' = 'kafka',
           'topic' = 'cheap', 'properties.bootstrap.servers' = '{}', 'format' = 'json',
           'sink.delivery-guarantee' = 'exactly-once');
         CREATE TABLE cheap_files (auction BIGINT, price BIGINT) WITH (
           'connector' = 'filesystem', 'path' = '{}', 'format' = 'json');
         INSERT INTO cheap SELECT auction, price FROM bid WHERE price < 2000;
         INSERT INTO cheap_files SELECT auction, price FROM bid WHERE price < 2000;",
        broker.address,
        files.display()
    );
    run_ok(&scratch, &script, 2);
    let expected = visible_lines(&files);
    assert!(!expected.is_empty());
    let got = broker.read_committed("cheap");
    assert_eq!(counts(&got), counts(&expected));
}

#[test]
fn jobs_sharing_a_transactional_id_prefix_each_write_all_their_records() {
    let broker = Broker::start();
    broker.create_topic("shared", 1);
    let scratch = Scratch::new("kafka-prefix");
    // The first job takes more checkpoints than the second will: its markers (same
    // writer ids, through the prefix) must not make the second job's look committed.
    let script = |rows: u64, start: u64, rate: u64| {
        format!(
            "SET 'execution.checkpointing.interval' = '100ms';
             CREATE TABLE n (id BIGINT) WITH ('connector' = 'datagen',
               'fields.id.kind' = 'sequence', 'fields.id.start' = '{start}',
               'fields.id.end' = '{}', 'rows-per-second' = '{rate}');
             CREATE TABLE out (id BIGINT) WITH ('connector' = 'kafka', 'topic' = 'shared',
               'properties.bootstrap.servers' = '{}', 'format' = 'csv',
               'sink.delivery-guarantee' = 'exactly-once',
               'sink.transactional-id-prefix' = 'orders-sink');
             INSERT INTO out SELECT id FROM n;",
            start + rows - 1,
            broker.address
        )
    };
    run_ok(&scratch, &script(3_000, 1, 3_000), 1);
    run_ok(&scratch, &script(500, 100_001, 5_000), 1);
    let mut got: Vec<u64> = broker
        .read_committed("shared")
        .iter()
        .map(|l| l.parse().unwrap())
        .collect();
    got.sort_unstable();
    let expected: Vec<u64> = (1..=3_000).chain(100_001..=100_500).collect();
    assert_eq!(got.len(), expected.len(), "records in the topic");
    assert!(got == expected, "each job's records, once");
}

/// One transaction of [`transactions_survive_broker_restarts`], the way Eddy's sink writes
/// one: skipped when its marker (the writer group's offset) says it is in, else its records
/// and its marker in one transaction.
fn write_transaction(
    producer: &BaseProducer,
    marker: &BaseConsumer,
    checkpoint: i64,
    records: usize,
) -> Result<(), KafkaError> {
    let mut partition = TopicPartitionList::new();
    partition.add_partition("t", 0);
    let committed = marker.committed_offsets(partition, TIMEOUT)?;
    if let Some(Offset::Offset(done)) = committed.elements().first().map(|e| e.offset())
        && done >= checkpoint
    {
        return Ok(());
    }
    producer.begin_transaction()?;
    for i in 0..records {
        let line = format!("{checkpoint}-{i}");
        producer
            .send(BaseRecord::<(), str>::to("t").payload(&line))
            .map_err(|(e, _)| e)?;
    }
    let mut offsets = TopicPartitionList::new();
    offsets.add_partition_offset("t", 0, Offset::Offset(checkpoint))?;
    let group = marker.group_metadata().expect("a group");
    producer.send_offsets_to_transaction(&offsets, &group, TIMEOUT)?;
    producer.commit_transaction(TIMEOUT)
}

/// What exactly-once into Kafka needs of a broker that restarts: every transaction it
/// acknowledged is there afterwards, records and offsets, once. A writer commits 100
/// transactions, retrying each with a new producer after any error, while the broker is
/// restarted every 0.2-2 s.
#[test]
#[ignore = "noida-db 0.2.3 loses transactions across restarts (see Broker::restart); run it \
            against a broker that should keep them"]
fn transactions_survive_broker_restarts() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Mutex};

    const TRANSACTIONS: i64 = 100;
    const RECORDS: usize = 50;
    let broker = Broker::start();
    broker.create_topic("t", 1);
    let address = broker.address.clone();
    let config = broker.config();
    let broker = Arc::new(Mutex::new(broker));
    let done = Arc::new(AtomicBool::new(false));
    let restarter = {
        let (broker, done) = (broker.clone(), done.clone());
        std::thread::spawn(move || {
            let mut rng = crate::recovery::seeded();
            let mut restarts = 0;
            while !done.load(Ordering::Relaxed) {
                let pause = 200 + crate::recovery::next(&mut rng) % 1800;
                std::thread::sleep(Duration::from_millis(pause));
                broker.lock().unwrap().restart();
                restarts += 1;
            }
            restarts
        })
    };
    let marker: BaseConsumer = config
        .clone()
        .set("group.id", "writer")
        .set("enable.auto.commit", "false")
        .set("isolation.level", "read_committed")
        .create()
        .unwrap();
    let mut producer: Option<BaseProducer> = None;
    for checkpoint in 1..=TRANSACTIONS {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            assert!(
                Instant::now() < deadline,
                "transaction {checkpoint} never went in"
            );
            let attempt = match &producer {
                Some(producer) => write_transaction(producer, &marker, checkpoint, RECORDS),
                None => config
                    .clone()
                    .set("transactional.id", "writer")
                    .create::<BaseProducer>()
                    .and_then(|p| {
                        p.init_transactions(TIMEOUT)?;
                        producer = Some(p);
                        Ok(())
                    })
                    .and_then(|()| {
                        let producer = producer.as_ref().expect("a producer");
                        write_transaction(producer, &marker, checkpoint, RECORDS)
                    }),
            };
            match attempt {
                Ok(()) => break,
                Err(_) => {
                    if let Some(producer) = producer.take() {
                        let _ = producer.abort_transaction(Duration::from_secs(5));
                    }
                    std::thread::sleep(Duration::from_millis(200));
                }
            }
        }
    }
    done.store(true, Ordering::Relaxed);
    let restarts = restarter.join().unwrap();
    let broker = broker.lock().unwrap();
    assert_eq!(broker.address, address);
    let got = broker.read_committed("t");
    let expected: Vec<String> = (1..=TRANSACTIONS)
        .flat_map(|t| (0..RECORDS).map(move |i| format!("{t}-{i}")))
        .collect();
    let (got, expected) = (counts(&got), counts(&expected));
    let wrong: Vec<String> = expected
        .keys()
        .filter(|record| got.get(*record) != Some(&1))
        .map(|record| format!("{record} x{}", got.get(record).copied().unwrap_or(0)))
        .collect();
    assert!(
        wrong.is_empty(),
        "after {restarts} restarts, {} of {} acknowledged records are not there once: {:?}",
        wrong.len(),
        expected.len(),
        &wrong[..wrong.len().min(20)]
    );
}

/// The exactly-once sink while the broker freezes past its clients' request timeout, time
/// and again: requests time out and are retried, transactions fail and the job restarts;
/// the topic must end up with every record once.
#[test]
fn the_kafka_sink_stays_exact_while_the_broker_freezes() {
    let broker = Broker::start();
    broker.create_topic("frozen", 2);
    let scratch = Scratch::new("kafka-frozen");
    let files = scratch.path().join("files");
    let script = format!(
        "SET 'execution.checkpointing.interval' = '500ms';
         SET 'restart-strategy.exponential-delay.initial-backoff' = '100ms';
         SET 'restart-strategy.exponential-delay.max-backoff' = '500ms';
         CREATE TABLE bid (auction BIGINT, bidder BIGINT, price BIGINT) WITH (
           'connector' = 'nexmark', 'nexmark.table' = 'bid', 'events.num' = '200000',
           'events.rate' = '20000');
         CREATE TABLE cheap (auction BIGINT, bidder BIGINT, price BIGINT) WITH (
           'connector' = 'kafka', 'topic' = 'frozen', 'properties.bootstrap.servers' = '{}',
           'properties.socket.timeout.ms' = '1500', 'format' = 'csv',
           'sink.delivery-guarantee' = 'exactly-once');
         CREATE TABLE cheap_files (auction BIGINT, bidder BIGINT, price BIGINT) WITH (
           'connector' = 'filesystem', 'path' = '{}', 'format' = 'csv');
         INSERT INTO cheap SELECT auction, bidder, price FROM bid WHERE price < 2000;
         INSERT INTO cheap_files SELECT auction, bidder, price FROM bid WHERE price < 2000;",
        broker.address,
        files.display()
    );
    let file = scratch.path().join("job.sql");
    std::fs::write(&file, script).unwrap();
    let mut run = crate::support::eddy()
        .args(["run", "--parallelism", "2"])
        .arg(&file)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let mut rng = crate::recovery::seeded();
    let mut freezes = 0;
    while run.try_wait().unwrap().is_none() {
        std::thread::sleep(Duration::from_millis(
            500 + crate::recovery::next(&mut rng) % 1500,
        ));
        if freezes < 4 {
            let frozen = Duration::from_millis(2000 + crate::recovery::next(&mut rng) % 3000);
            eprintln!("the broker frozen for {frozen:?}");
            broker.pause();
            std::thread::sleep(frozen);
            broker.resume();
            freezes += 1;
        }
    }
    assert!(run.wait().unwrap().success(), "the job failed");
    let expected = visible_lines(&files);
    assert!(!expected.is_empty());
    let got = broker.read_committed("frozen");
    let (got, expected) = (counts(&got), counts(&expected));
    let wrong: Vec<String> = expected
        .iter()
        .filter(|(record, n)| got.get(*record) != Some(n))
        .map(|(record, _)| format!("{record} x{}", got.get(record).copied().unwrap_or(0)))
        .take(20)
        .collect();
    assert!(
        wrong.is_empty() && got.len() == expected.len(),
        "after {freezes} freezes: {wrong:?}"
    );
}
