//! Avro in Kafka topics against writers and readers Eddy did not write: records that
//! confluent-kafka's `AvroSerializer` and fastavro wrote, read by Eddy, and Eddy's records
//! read back by them, through a schema registry (a small one speaking Confluent's REST
//! API, `schema_registry.py`: no real registry can be installed here).

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use crate::kafka::Broker;
use crate::support::{Scratch, python, python_float, run_ok, run_script, visible_lines};

/// The registry's credentials in these tests.
const USER_INFO: &str = "eddy:s3cret";

/// A schema registry on a free loopback port, stopped on drop.
pub struct Registry {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    pub url: String,
}

impl Registry {
    /// A registry asking for [`USER_INFO`].
    fn start() -> Registry {
        Registry::start_with(&["--user-info", USER_INFO])
    }

    /// A registry without authentication.
    pub fn open() -> Registry {
        Registry::start_with(&[])
    }

    fn start_with(args: &[&str]) -> Registry {
        let script = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/integration-tests/schema_registry.py"
        );
        let mut child = Command::new("python3")
            .arg(script)
            .args(args)
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the schema registry");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line.trim().strip_prefix("listening on ").expect("a port");
        Registry {
            child,
            url: format!("http://127.0.0.1:{port}"),
        }
    }

    /// A Python `SchemaRegistryClient` configuration.
    fn client_config(&self) -> String {
        format!(
            "{{'url': '{}', 'basic.auth.user.info': '{USER_INFO}'}}",
            self.url
        )
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A writer schema of an earlier version of the users' records: `id` an int, no
/// `country`, in a namespace of its own.
const USERS_V1: &str = r#"{"type": "record", "name": "User", "namespace": "com.example",
  "fields": [
    {"name": "id", "type": "int"},
    {"name": "name", "type": ["null", "string"], "default": null},
    {"name": "amount", "type": "double"},
    {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}}]}"#;

/// A later version: `id` a long, `country` added, a field the table lacks.
const USERS_V2: &str = r#"{"type": "record", "name": "User", "namespace": "com.example",
  "fields": [
    {"name": "id", "type": "long"},
    {"name": "source", "type": "string"},
    {"name": "name", "type": ["null", "string"], "default": null},
    {"name": "amount", "type": "double"},
    {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "country", "type": ["null", "string"], "default": null}]}"#;

/// Produces, with confluent-kafka's `AvroSerializer` (which registers each schema under
/// `<topic>-value`), 3 records of [`USERS_V1`] and 3 of [`USERS_V2`], interleaved.
pub fn produce_users(broker: &Broker, registry: &Registry, topic: &str) {
    python(&format!(
        r#"
from confluent_kafka import Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import SerializationContext, MessageField
registry = SchemaRegistryClient({config})
v1 = AvroSerializer(registry, '''{v1}''')
v2 = AvroSerializer(registry, '''{v2}''')
context = SerializationContext('{topic}', MessageField.VALUE)
producer = Producer({{'bootstrap.servers': '{broker}'}})
for i in range(3):
    old = {{'id': i, 'name': None if i == 1 else 'user%d' % i, 'amount': i * 1.5,
            'ts': 1704153573004 + i}}
    new = {{'id': 2**40 + i, 'source': 'app', 'name': 'new%d' % i, 'amount': -i * 0.25,
            'ts': 1704153573004 - i, 'country': None if i == 2 else 'NO'}}
    producer.produce('{topic}', value=v1(old, context))
    producer.produce('{topic}', value=v2(new, context))
producer.flush(30)
"#,
        config = registry.client_config(),
        v1 = USERS_V1,
        v2 = USERS_V2,
        broker = broker.address,
    ));
}

/// The CSV lines the users' records are, as Eddy writes them.
pub fn expected_users() -> Vec<String> {
    let mut lines = Vec::new();
    for i in 0..3i64 {
        let name = if i == 1 {
            String::new()
        } else {
            format!("user{i}")
        };
        lines.push(format!(
            "{i},{name},{},2024-01-01 23:59:33.{:03},",
            python_float(i as f64 * 1.5),
            4 + i
        ));
        let country = if i == 2 { "" } else { "NO" };
        lines.push(format!(
            "{},new{i},{},2024-01-01 23:59:33.{:03},{country}",
            (1i64 << 40) + i,
            python_float(-(i as f64) * 0.25),
            4 - i
        ));
    }
    lines.sort();
    lines
}

fn users_table(
    name: &str,
    topic: &str,
    broker: &Broker,
    registry: &Registry,
    extra: &str,
) -> String {
    format!(
        "CREATE TABLE {name} (id BIGINT, name STRING, amount DOUBLE, ts TIMESTAMP(3),
           country STRING) WITH ('connector' = 'kafka', 'topic' = '{topic}',
           'properties.bootstrap.servers' = '{}', 'format' = 'avro-confluent',
           'avro-confluent.url' = '{}',
           'avro-confluent.basic-auth.credentials-source' = 'USER_INFO',
           'avro-confluent.basic-auth.user-info' = '{USER_INFO}',
           'scan.bounded.mode' = 'latest-offset'{extra});",
        broker.address, registry.url
    )
}

fn sorted(mut lines: Vec<String>) -> Vec<String> {
    lines.sort();
    lines
}

#[test]
fn confluent_avro_records_of_two_schema_versions_are_read_and_eddys_are_read_by_confluent() {
    let broker = Broker::start();
    let registry = Registry::start();
    broker.create_topic("users", 2);
    broker.create_topic("users_copy", 1);
    produce_users(&broker, &registry, "users");

    let scratch = Scratch::new("avro-confluent");
    let out = scratch.path().join("out");
    let script = format!(
        "SET 'execution.checkpointing.interval' = '200ms';
         {}
         {}
         CREATE TABLE out (id BIGINT, name STRING, amount DOUBLE, ts TIMESTAMP(3),
           country STRING) WITH ('connector' = 'filesystem', 'path' = '{}', 'format' = 'csv');
         INSERT INTO out SELECT * FROM users;
         INSERT INTO users_copy SELECT * FROM users;",
        users_table("users", "users", &broker, &registry, ""),
        users_table(
            "users_copy",
            "users_copy",
            &broker,
            &registry,
            ", 'sink.delivery-guarantee' = 'exactly-once'"
        ),
        out.display()
    );
    run_ok(&scratch, &script, 2);
    assert_eq!(sorted(visible_lines(&out)), expected_users());

    // Eddy's records, read by confluent-kafka's deserializer through the schema Eddy
    // registered under `users_copy-value`.
    let read = python(&format!(
        r#"
import json
from confluent_kafka import Consumer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import SerializationContext, MessageField
registry = SchemaRegistryClient({config})
read = AvroDeserializer(registry)
consumer = Consumer({{'bootstrap.servers': '{broker}', 'group.id': 'check',
    'auto.offset.reset': 'earliest', 'isolation.level': 'read_committed'}})
consumer.subscribe(['users_copy'])
rows, idle = [], 0
while len(rows) < 6 and idle < 20:
    message = consumer.poll(1.0)
    if message is None or message.error():
        idle += 1
        continue
    row = read(message.value(), SerializationContext('users_copy', MessageField.VALUE))
    row['ts'] = row['ts'].strftime('%Y-%m-%d %H:%M:%S.%f')[:-3]
    rows.append(row)
subject = registry.get_latest_version('users_copy-value')
print(json.dumps({{'rows': rows, 'schema': json.loads(subject.schema.schema_str)}}))
"#,
        config = registry.client_config(),
        broker = broker.address,
    ));
    let answer: serde_json::Value = serde_json::from_str(read.trim()).unwrap();
    let field = |v: &serde_json::Value| match v {
        serde_json::Value::Null => String::new(),
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let lines: Vec<String> = answer["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| {
            ["id", "name", "amount", "ts", "country"]
                .map(|k| field(&row[k]))
                .join(",")
        })
        .collect();
    assert_eq!(sorted(lines), expected_users());
    // The schema Eddy registered is the table's, as Flink derives it.
    assert_eq!(answer["schema"]["name"], "record");
    assert_eq!(
        answer["schema"]["namespace"],
        "org.apache.flink.avro.generated"
    );
    assert_eq!(
        answer["schema"]["fields"][3]["type"][1]["logicalType"],
        "timestamp-millis"
    );
}

#[test]
fn plain_avro_records_pass_between_fastavro_and_eddy() {
    let broker = Broker::start();
    broker.create_topic("plain_in", 1);
    broker.create_topic("plain_out", 1);
    // fastavro writes records of the schema Flink derives from the table.
    let schema = r#"{"type": "record", "name": "org.apache.flink.avro.generated.record",
      "fields": [{"name": "id", "type": "long"},
        {"name": "price", "type": ["null", {"type": "bytes", "logicalType": "decimal",
          "precision": 10, "scale": 2}], "default": null},
        {"name": "day", "type": ["null", {"type": "int", "logicalType": "date"}], "default": null},
        {"name": "ok", "type": ["null", "boolean"], "default": null}]}"#;
    python(&format!(
        r#"
import io, json, datetime, decimal, fastavro
from confluent_kafka import Producer
schema = fastavro.parse_schema(json.loads('''{schema}'''))
producer = Producer({{'bootstrap.servers': '{broker}'}})
for i in range(100):
    out = io.BytesIO()
    fastavro.schemaless_writer(out, schema, {{'id': i,
        'price': None if i % 10 == 0 else decimal.Decimal(i * 101) / 100,
        'day': datetime.date(2024, 1, 1) + datetime.timedelta(days=i), 'ok': i % 2 == 0}})
    producer.produce('plain_in', value=out.getvalue())
producer.flush(30)
"#,
        broker = broker.address,
    ));
    let scratch = Scratch::new("avro-plain");
    let table = |name: &str| {
        format!(
            "CREATE TABLE {name} (id BIGINT NOT NULL, price DECIMAL(10, 2), day DATE,
               ok BOOLEAN) WITH ('connector' = 'kafka', 'topic' = '{name}',
               'properties.bootstrap.servers' = '{}', 'format' = 'avro',
               'scan.bounded.mode' = 'latest-offset');",
            broker.address
        )
    };
    let script = format!(
        "{} {} INSERT INTO plain_out SELECT id, price * 2, day, ok FROM plain_in WHERE id < 50;",
        table("plain_in"),
        table("plain_out")
    );
    run_ok(&scratch, &script, 1);
    let read = python(&format!(
        r#"
import io, json, fastavro
from confluent_kafka import Consumer
schema = fastavro.parse_schema(json.loads('''{schema}'''))
consumer = Consumer({{'bootstrap.servers': '{broker}', 'group.id': 'check',
    'auto.offset.reset': 'earliest'}})
consumer.subscribe(['plain_out'])
rows, idle = [], 0
while len(rows) < 50 and idle < 20:
    message = consumer.poll(1.0)
    if message is None or message.error():
        idle += 1
        continue
    row = fastavro.schemaless_reader(io.BytesIO(message.value()), schema)
    rows.append('%s,%s,%s,%s' % (row['id'], row['price'], row['day'], row['ok']))
print('\n'.join(rows))
"#,
        broker = broker.address,
    ));
    let mut got: Vec<String> = read.lines().map(str::to_string).collect();
    got.sort_by_key(|l| l.split(',').next().unwrap().parse::<i64>().unwrap());
    let expected: Vec<String> = (0..50i64)
        .map(|i| {
            let price = match i % 10 {
                0 => "None".to_string(),
                _ => format!("{}.{:02}", i * 202 / 100, i * 202 % 100),
            };
            let day = chrono_day(i);
            let ok = if i % 2 == 0 { "True" } else { "False" };
            format!("{i},{price},{day},{ok}")
        })
        .collect();
    assert_eq!(got, expected);
}

/// 2024-01-01 plus `days`, as Python prints a date.
fn chrono_day(days: i64) -> String {
    let output = python(&format!(
        "import datetime; print(datetime.date(2024, 1, 1) + datetime.timedelta(days={days}))"
    ));
    output.trim().to_string()
}

#[test]
fn unreadable_avro_records_fail_the_job_naming_the_offset_or_are_skipped() {
    let broker = Broker::start();
    let registry = Registry::start();
    broker.create_topic("mixed", 1);
    produce_users(&broker, &registry, "mixed");
    // After the six good records: one cut short, one of an id the registry lacks, one
    // that is not Avro at all, then a good one.
    python(&format!(
        r#"
from confluent_kafka import Consumer, Producer
consumer = Consumer({{'bootstrap.servers': '{broker}', 'group.id': 'copy',
    'auto.offset.reset': 'earliest'}})
consumer.subscribe(['mixed'])
good = None
while good is None:
    message = consumer.poll(1.0)
    if message is not None and not message.error():
        good = message.value()
producer = Producer({{'bootstrap.servers': '{broker}'}})
producer.produce('mixed', value=good[:-3])
producer.produce('mixed', value=b'\x00\x00\x00\x03\xe7' + good[5:])
producer.produce('mixed', value=b'{{"id": 1}}')
producer.produce('mixed', value=good)
producer.flush(30)
"#,
        broker = broker.address,
    ));
    let scratch = Scratch::new("avro-hostile");
    let out = scratch.path().join("out");
    let script = |extra: &str| {
        format!(
            "{}
             CREATE TABLE out (id BIGINT, name STRING, amount DOUBLE, ts TIMESTAMP(3),
               country STRING) WITH ('connector' = 'filesystem', 'path' = '{}',
               'format' = 'csv');
             INSERT INTO out SELECT * FROM mixed;",
            users_table("mixed", "mixed", &broker, &registry, extra),
            out.display()
        )
    };
    let failed = run_script(&scratch, &script(""), 1);
    assert!(!failed.status.success());
    let stderr = String::from_utf8_lossy(&failed.stderr);
    assert!(
        stderr.contains("topic 'mixed' partition 0, offset at line 6")
            && stderr.contains("avro-confluent record: its value does not decode"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&out);
    run_ok(
        &scratch,
        &script(", 'avro-confluent.ignore-parse-errors' = 'true'"),
        1,
    );
    assert_eq!(visible_lines(&out).len(), 7);
}

#[test]
fn a_registry_that_refuses_the_credentials_fails_the_job_clearly() {
    let broker = Broker::start();
    let registry = Registry::start();
    broker.create_topic("users", 1);
    produce_users(&broker, &registry, "users");
    let scratch = Scratch::new("avro-auth");
    let script = users_table("users", "users", &broker, &registry, "")
        .replace(USER_INFO, "eddy:wrong")
        + "CREATE TABLE out (id BIGINT) WITH ('connector' = 'blackhole');
           INSERT INTO out SELECT id FROM users;";
    let failed = run_script(&scratch, &script, 1);
    assert!(!failed.status.success());
    let stderr = String::from_utf8_lossy(&failed.stderr);
    assert!(stderr.contains("answered 401"), "{stderr}");
}

/// Debezium's envelope of the `customers` table as its Avro converter writes it: `Value`
/// defined in `before`, referenced in `after`.
const CUSTOMERS_ENVELOPE: &str = r#"{"type": "record", "name": "Envelope",
  "namespace": "dbserver1.inventory.customers", "fields": [
    {"name": "before", "type": ["null", {"type": "record", "name": "Value", "fields": [
        {"name": "id", "type": "int"},
        {"name": "name", "type": ["null", "string"], "default": null}]}], "default": null},
    {"name": "after", "type": ["null", "Value"], "default": null},
    {"name": "source", "type": {"type": "record", "name": "Source",
      "namespace": "io.debezium.connector.postgresql",
      "fields": [{"name": "db", "type": "string"}, {"name": "lsn", "type": ["null", "long"]}]}},
    {"name": "op", "type": "string"},
    {"name": "ts_ms", "type": ["null", "long"], "default": null}]}"#;

#[test]
fn debezium_avro_changes_written_by_confluents_serializer_are_read_as_changes() {
    let broker = Broker::start();
    let registry = Registry::start();
    broker.create_topic("customers", 1);
    // A snapshot, then an insert, updates and a delete with its tombstone.
    python(&format!(
        r#"
from confluent_kafka import Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import SerializationContext, MessageField
registry = SchemaRegistryClient({config})
serialize = AvroSerializer(registry, '''{envelope}''')
context = SerializationContext('customers', MessageField.VALUE)
producer = Producer({{'bootstrap.servers': '{broker}'}})
source = {{'db': 'inventory', 'lsn': 42}}
row = lambda i, name: {{'id': i, 'name': name}}
changes = [
    (None, row(1, 'ann'), 'r'), (None, row(2, 'bob'), 'r'), (None, row(3, None), 'c'),
    (row(1, 'ann'), row(1, 'anne'), 'u'), (row(2, 'bob'), None, 'd'), None,
    (row(3, None), row(3, 'cy'), 'u'), (None, row(4, 'dan'), 'c'),
]
for change in changes:
    if change is None:
        producer.produce('customers', value=None)
        continue
    before, after, op = change
    envelope = {{'before': before, 'after': after, 'source': source, 'op': op, 'ts_ms': 5}}
    producer.produce('customers', value=serialize(envelope, context))
producer.flush(30)
"#,
        config = registry.client_config(),
        envelope = CUSTOMERS_ENVELOPE,
        broker = broker.address,
    ));
    let scratch = Scratch::new("debezium-avro");
    let script = format!(
        "CREATE TABLE customers (id BIGINT, name STRING) WITH ('connector' = 'kafka',
           'topic' = 'customers', 'properties.bootstrap.servers' = '{}',
           'format' = 'debezium-avro-confluent', 'debezium-avro-confluent.url' = '{}',
           'debezium-avro-confluent.basic-auth.credentials-source' = 'USER_INFO',
           'debezium-avro-confluent.basic-auth.user-info' = '{USER_INFO}',
           'scan.bounded.mode' = 'latest-offset');
         CREATE TABLE answer (id BIGINT, name STRING, n BIGINT) WITH ('connector' = 'print');
         INSERT INTO answer SELECT id, MAX(name), COUNT(*) FROM customers GROUP BY id;",
        broker.address, registry.url
    );
    let output = run_ok(&scratch, &script, 2);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let mut rows: Vec<String> =
        crate::support::materialize(&crate::support::parse_changes(&stdout))
            .into_iter()
            .map(|(row, n)| format!("{} x{n}", row.join(", ")))
            .collect();
    rows.sort();
    assert_eq!(rows, vec!["1, anne, 1 x1", "3, cy, 1 x1", "4, dan, 1 x1"]);
    // The format reads changes: it cannot be written.
    let write = format!(
        "{}
         CREATE TABLE src (id BIGINT, name STRING) WITH ('connector' = 'datagen',
           'number-of-rows' = '1');
         INSERT INTO customers SELECT * FROM src;",
        script.split("CREATE TABLE answer").next().unwrap()
    );
    let refused = run_script(&scratch, &write, 1);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success() && stderr.contains("'debezium-avro-confluent' format"),
        "{stderr}"
    );
}

#[test]
fn upsert_kafka_keys_and_values_in_avro_pass_between_eddy_and_confluent() {
    let broker = Broker::start();
    let registry = Registry::start();
    broker.create_topic("totals", 2);
    let scratch = Scratch::new("upsert-avro");
    // Orders of 5 customers; customer 'c0' is filtered out once its total passes 20, so
    // its key is deleted (a tombstone).
    let orders: String = (0..60).map(|i| format!("c{},{}\n", i % 5, i % 7)).collect();
    let orders = scratch.write("orders.csv", &orders);
    let upsert = |extra: &str| {
        format!(
            "CREATE TABLE totals (customer STRING, n BIGINT, total BIGINT,
               PRIMARY KEY (customer) NOT ENFORCED) WITH ('connector' = 'upsert-kafka',
               'topic' = 'totals', 'properties.bootstrap.servers' = '{}',
               'key.format' = 'avro-confluent', 'key.avro-confluent.url' = '{url}',
               'key.avro-confluent.basic-auth.user-info' = '{USER_INFO}',
               'value.format' = 'avro-confluent', 'value.avro-confluent.url' = '{url}',
               'value.avro-confluent.basic-auth.user-info' = '{USER_INFO}'{extra});",
            broker.address,
            url = registry.url
        )
    };
    let write = format!(
        "SET 'execution.checkpointing.interval' = '200ms';
         CREATE TABLE orders (customer STRING, amount BIGINT) WITH ('connector' = 'filesystem',
           'path' = '{}', 'format' = 'csv');
         {}
         INSERT INTO totals SELECT * FROM (SELECT customer, COUNT(*) AS n,
           SUM(amount) AS total FROM orders GROUP BY customer)
           WHERE customer <> 'c0' OR total <= 20;",
        orders.display(),
        upsert(", 'sink.delivery-guarantee' = 'exactly-once'")
    );
    run_ok(&scratch, &write, 2);
    let mut expected = std::collections::BTreeMap::new();
    for i in 0..60i64 {
        let entry = expected
            .entry(format!("c{}", i % 5))
            .or_insert((0i64, 0i64));
        entry.0 += 1;
        entry.1 += i % 7;
    }
    expected.retain(|customer, (_, total)| customer != "c0" || *total <= 20);
    let expected: Vec<String> = expected
        .iter()
        .map(|(c, (n, total))| format!("{c},{n},{total}"))
        .collect();

    // confluent-kafka's deserializers read Eddy's keys and values (the last per key).
    let read = python(&format!(
        r#"
from confluent_kafka import Consumer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import SerializationContext, MessageField
registry = SchemaRegistryClient({config})
read = AvroDeserializer(registry)
consumer = Consumer({{'bootstrap.servers': '{broker}', 'group.id': 'check',
    'auto.offset.reset': 'earliest', 'isolation.level': 'read_committed',
    'enable.partition.eof': True}})
consumer.subscribe(['totals'])
table, ended = {{}}, set()
while len(ended) < 2:
    message = consumer.poll(5.0)
    if message is None:
        break
    if message.error():
        ended.add(message.partition())
        continue
    key = read(message.key(), SerializationContext('totals', MessageField.KEY))
    if message.value() is None:
        table.pop(key['customer'], None)
    else:
        value = read(message.value(), SerializationContext('totals', MessageField.VALUE))
        table[key['customer']] = '%s,%d,%d' % (value['customer'], value['n'], value['total'])
print('\n'.join(table[k] for k in sorted(table)))
"#,
        config = registry.client_config(),
        broker = broker.address,
    ));
    let read: Vec<String> = read.lines().map(str::to_string).collect();
    assert_eq!(read, expected);

    // Eddy reads the topic back as the same table.
    let back = format!(
        "{}
         CREATE TABLE answer (customer STRING, n BIGINT, total BIGINT)
           WITH ('connector' = 'print');
         INSERT INTO answer SELECT * FROM totals;",
        upsert(", 'scan.bounded.mode' = 'latest-offset'")
    );
    let output = run_ok(&scratch, &back, 2);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let rows: Vec<String> = crate::support::materialize(&crate::support::parse_changes(&stdout))
        .into_keys()
        .map(|row| row.join(","))
        .collect();
    assert_eq!(rows, expected);
}

#[test]
fn avro_container_files_pass_between_fastavro_and_eddy() {
    let scratch = Scratch::new("avro-files");
    let input = scratch.path().join("in");
    let output = scratch.path().join("out");
    std::fs::create_dir_all(&input).unwrap();
    // fastavro writes two files (deflate and snappy) of a schema with a field the table
    // lacks and an int the table reads as BIGINT; the table's `note` is in neither.
    python(&format!(
        r#"
import fastavro
schema = fastavro.parse_schema({{'type': 'record', 'name': 'Event', 'fields': [
    {{'name': 'id', 'type': 'int'}},
    {{'name': 'extra', 'type': 'string'}},
    {{'name': 'name', 'type': ['null', 'string']}},
    {{'name': 'ts', 'type': {{'type': 'long', 'logicalType': 'timestamp-millis'}}}}]}})
for part, codec in [(0, 'deflate'), (1, 'snappy')]:
    rows = [{{'id': i, 'extra': 'x', 'name': None if i % 4 == 0 else 'n%d' % i,
              'ts': 1704067200000 + i}} for i in range(part * 500, part * 500 + 500)]
    with open('{dir}/part-%d.avro' % part, 'wb') as out:
        fastavro.writer(out, schema, rows, codec=codec)
"#,
        dir = input.display()
    ));
    let script = format!(
        "SET 'execution.checkpointing.interval' = '100ms';
         CREATE TABLE events (id BIGINT, name STRING, ts TIMESTAMP(3), note STRING) WITH (
           'connector' = 'filesystem', 'path' = '{}', 'format' = 'avro');
         CREATE TABLE copy (id BIGINT, name STRING, ts TIMESTAMP(3), note STRING) WITH (
           'connector' = 'filesystem', 'path' = '{}', 'format' = 'avro',
           'avro.codec' = 'zstandard');
         INSERT INTO copy SELECT id * 2, name, ts, note FROM events WHERE id % 3 <> 0;",
        input.display(),
        output.display()
    );
    run_ok(&scratch, &script, 2);
    // fastavro reads Eddy's files back: the rows, and the schema Flink would derive.
    let read = python(&format!(
        r#"
import fastavro, glob, json
rows, schemas = [], set()
for path in sorted(glob.glob('{dir}/part-*.avro')):
    with open(path, 'rb') as f:
        reader = fastavro.reader(f)
        schemas.add(json.dumps(reader.writer_schema['fields'][1]['type']))
        for row in reader:
            rows.append('%d,%s,%s,%s' % (row['id'], row['name'], row['ts'].isoformat()[:23],
                row['note']))
rows.sort(key=lambda r: int(r.split(',')[0]))
print(json.dumps({{'rows': rows, 'schemas': sorted(schemas)}}))
"#,
        dir = output.display()
    ));
    let answer: serde_json::Value = serde_json::from_str(read.trim()).unwrap();
    let rows: Vec<String> = answer["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap().to_string())
        .collect();
    let expected: Vec<String> = (0..1000i64)
        .filter(|i| i % 3 != 0)
        .map(|i| {
            let name = if i % 4 == 0 {
                "None".to_string()
            } else {
                format!("n{i}")
            };
            format!("{},{name},2024-01-01T00:00:00.{:03},None", i * 2, i)
        })
        .collect();
    assert_eq!(rows, expected);
    assert_eq!(answer["schemas"][0], r#"["null", "string"]"#);
}
