//! Protobuf in Kafka topics against code Eddy did not write: messages that
//! `protoc`-generated Python (grpcio-tools' protoc, the protobuf package) serialized, read
//! by Eddy through a descriptor set of an older version of the message (so the newer
//! fields are unknown to it), and Eddy's records parsed back by the generated class.

use crate::kafka::Broker;
use crate::support::{Scratch, python, python_float, run_ok, run_script, visible_lines};

/// Version 1 of the message, Eddy's descriptor set.
const ORDERS_V1: &str = r#"syntax = "proto3";
package shop;
message Order {
  int64 id = 1;
  string customer = 2;
  sint32 quantity = 3;
  double price = 4;
  Status status = 5;
  Address address = 6;
  optional string note = 7;
  enum Status { NEW = 0; PAID = 1; SHIPPED = 2; }
}
message Address { string city = 1; int32 zip = 2; }
"#;

/// Version 2, the producer's: a repeated field and a nested message added.
const ORDERS_V2_EXTRA: &str = r#"
  repeated string tags = 8;
  Address billing = 9;
  fixed64 trace = 10;
"#;

/// Writes `proto` into `dir` and compiles it: a Python module and a descriptor set.
fn compile(scratch: &Scratch, dir: &str, proto: &str) -> std::path::PathBuf {
    let dir = scratch.path().join(dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("orders.proto"), proto).unwrap();
    python(&format!(
        "from grpc_tools import protoc\n\
         assert protoc.main(['protoc', '-I{dir}', '--python_out={dir}', \
           '--include_imports', '--descriptor_set_out={dir}/orders.desc', \
           '{dir}/orders.proto']) == 0",
        dir = dir.display()
    ));
    dir
}

#[test]
fn protoc_generated_messages_are_read_and_eddys_records_parse_in_the_generated_class() {
    let broker = Broker::start();
    broker.create_topic("orders", 2);
    broker.create_topic("orders_out", 1);
    let scratch = Scratch::new("protobuf");
    let v1 = compile(&scratch, "v1", ORDERS_V1);
    let v2_text = ORDERS_V1.replacen(
        "  enum Status",
        &format!("{ORDERS_V2_EXTRA}  enum Status"),
        1,
    );
    let v2 = compile(&scratch, "v2", &v2_text);
    python(&format!(
        r#"
import sys
sys.path.insert(0, '{v2}')
import orders_pb2
from confluent_kafka import Producer
producer = Producer({{'bootstrap.servers': '{broker}'}})
for i in range(60):
    order = orders_pb2.Order(id=i, customer='c%d' % (i % 7), quantity=(-1) ** i * i,
        price=i * 0.5, status=i % 3, tags=['a', 'b'], trace=2**63 + i)
    if i % 4:
        order.address.city = 'city%d' % i
        order.address.zip = 1000 + i
    if i % 5 == 0:
        order.note = ''
    elif i % 5 == 1:
        order.note = 'fragile'
    order.billing.city = 'x'
    producer.produce('orders', value=order.SerializeToString())
producer.flush(30)
"#,
        v2 = v2.display(),
        broker = broker.address
    ));
    let out = scratch.path().join("out");
    let table = |name: &str, bounded: &str| {
        format!(
            "CREATE TABLE {name} (id BIGINT, customer STRING, quantity INT, price DOUBLE,
               status STRING, address ROW<city STRING, zip INT>, note STRING) WITH (
               'connector' = 'kafka', 'topic' = '{name}',
               'properties.bootstrap.servers' = '{}', 'format' = 'protobuf',
               'protobuf.descriptor-file' = '{}/orders.desc',
               'protobuf.message-name' = 'shop.Order'{bounded});",
            broker.address,
            v1.display()
        )
    };
    let script = format!(
        "SET 'execution.checkpointing.interval' = '200ms';
         {} {}
         CREATE TABLE out (id BIGINT, customer STRING, quantity INT, price DOUBLE,
           status STRING, city STRING, zip INT, note STRING, no_note BOOLEAN) WITH (
           'connector' = 'filesystem', 'path' = '{}', 'format' = 'csv');
         INSERT INTO out SELECT id, customer, quantity, price, status, address.city,
           address.zip, note, note IS NULL FROM orders;
         INSERT INTO orders_out SELECT * FROM orders WHERE id < 30;",
        table("orders", ", 'scan.bounded.mode' = 'latest-offset'"),
        table("orders_out", ", 'sink.delivery-guarantee' = 'exactly-once'"),
        out.display()
    );
    run_ok(&scratch, &script, 2);
    let mut read = visible_lines(&out);
    read.sort_by_key(|l| l.split(',').next().unwrap().parse::<i64>().unwrap());
    let expected: Vec<String> = (0..60i64)
        .map(|i| {
            let quantity = if i % 2 == 0 { i } else { -i };
            let status = ["NEW", "PAID", "SHIPPED"][i as usize % 3];
            // An unset address is NULL (a message has presence); an unset note too, but
            // one set to '' is ''.
            let (city, zip) = match i % 4 {
                0 => (String::new(), String::new()),
                _ => (format!("city{i}"), (1000 + i).to_string()),
            };
            let note = match i % 5 {
                0 => ",false",
                1 => "fragile,false",
                _ => ",true",
            };
            format!(
                "{i},c{},{quantity},{},{status},{city},{zip},{note}",
                i % 7,
                python_float(i as f64 * 0.5)
            )
        })
        .collect();
    assert_eq!(read, expected);

    // Eddy's records, parsed by the class protoc generated (from version 1).
    let parsed = python(&format!(
        r#"
import sys
sys.path.insert(0, '{v1}')
import orders_pb2
from confluent_kafka import Consumer
consumer = Consumer({{'bootstrap.servers': '{broker}', 'group.id': 'check',
    'auto.offset.reset': 'earliest', 'isolation.level': 'read_committed'}})
consumer.subscribe(['orders_out'])
rows, idle = [], 0
while len(rows) < 30 and idle < 20:
    message = consumer.poll(1.0)
    if message is None or message.error():
        idle += 1
        continue
    order = orders_pb2.Order()
    order.ParseFromString(message.value())
    address = '%s/%d' % (order.address.city, order.address.zip) if order.HasField('address') else '-'
    note = repr(order.note) if order.HasField('note') else '-'
    rows.append('%d,%s,%d,%s,%s,%s,%s' % (order.id, order.customer, order.quantity,
        order.price, orders_pb2.Order.Status.Name(order.status), address, note))
print('\n'.join(rows))
"#,
        v1 = v1.display(),
        broker = broker.address
    ));
    let mut got: Vec<String> = parsed.lines().map(str::to_string).collect();
    got.sort_by_key(|l| l.split(',').next().unwrap().parse::<i64>().unwrap());
    let expected: Vec<String> = (0..30i64)
        .map(|i| {
            let quantity = if i % 2 == 0 { i } else { -i };
            let status = ["NEW", "PAID", "SHIPPED"][i as usize % 3];
            let address = match i % 4 {
                0 => "-".to_string(),
                _ => format!("city{i}/{}", 1000 + i),
            };
            let note = match i % 5 {
                0 => "''",
                1 => "'fragile'",
                _ => "-",
            };
            format!(
                "{i},c{},{quantity},{},{status},{address},{note}",
                i % 7,
                python_float(i as f64 * 0.5)
            )
        })
        .collect();
    assert_eq!(got, expected);
}

#[test]
fn malformed_protobuf_records_fail_the_job_naming_offset_and_byte() {
    let broker = Broker::start();
    broker.create_topic("orders", 1);
    let scratch = Scratch::new("protobuf-hostile");
    let v1 = compile(&scratch, "v1", ORDERS_V1);
    python(&format!(
        r#"
import sys
sys.path.insert(0, '{v1}')
import orders_pb2
from confluent_kafka import Producer
producer = Producer({{'bootstrap.servers': '{broker}'}})
good = orders_pb2.Order(id=1, customer='ann').SerializeToString()
producer.produce('orders', value=good)
producer.produce('orders', value=good[:-2])
producer.produce('orders', value=good)
producer.flush(30)
"#,
        v1 = v1.display(),
        broker = broker.address
    ));
    let script = |extra: &str| {
        format!(
            "CREATE TABLE orders (id BIGINT, customer STRING) WITH ('connector' = 'kafka',
               'topic' = 'orders', 'properties.bootstrap.servers' = '{}',
               'format' = 'protobuf', 'protobuf.descriptor-file' = '{}/orders.desc',
               'protobuf.message-name' = 'shop.Order',
               'scan.bounded.mode' = 'latest-offset'{extra});
             CREATE TABLE out (id BIGINT, customer STRING) WITH ('connector' = 'filesystem',
               'path' = '{}', 'format' = 'csv');
             INSERT INTO out SELECT * FROM orders;",
            broker.address,
            v1.display(),
            scratch.path().join("out").display()
        )
    };
    let failed = run_script(&scratch, &script(""), 1);
    assert!(!failed.status.success());
    let stderr = String::from_utf8_lossy(&failed.stderr);
    assert!(
        stderr.contains("topic 'orders' partition 0, offset at line 1: protobuf record:")
            && stderr.contains("runs past the end")
            && stderr.contains("at byte"),
        "{stderr}"
    );
    run_ok(
        &scratch,
        &script(", 'protobuf.ignore-parse-errors' = 'true'"),
        1,
    );
    assert_eq!(
        visible_lines(&scratch.path().join("out")),
        vec!["1,ann", "1,ann"]
    );
}

/// A message of repeated fields: scalars (packed by proto3, one declared unpacked),
/// strings, enums and messages that repeat fields of their own.
const BASKETS: &str = r#"syntax = "proto3";
package shop;
message Basket {
  int64 id = 1;
  repeated string tags = 2;
  repeated int64 counts = 3;
  repeated Item items = 4;
  repeated Kind kinds = 5;
  repeated sint32 deltas = 6 [packed = false];
  message Item { string sku = 1; double price = 2; repeated int32 sizes = 3; }
  enum Kind { NONE = 0; FRUIT = 1; TOOL = 2; }
}
"#;

/// Basket `i` as the producer builds it, as JSON of the table's columns.
fn basket(i: i64) -> serde_json::Value {
    let tags: Vec<String> = (0..i % 4).map(|j| format!("t{j}")).collect();
    let counts: Vec<i64> = (0..i % 5).map(|j| i * j - 7).collect();
    let items: Vec<serde_json::Value> = (0..i % 3)
        .map(|j| {
            serde_json::json!({
                "sku": format!("s{i}_{j}"),
                "price": j as f64 * 0.25,
                "sizes": (0..j).collect::<Vec<i64>>(),
            })
        })
        .collect();
    let kinds: Vec<&str> = (0..i % 4)
        .map(|j| ["NONE", "FRUIT", "TOOL"][j as usize % 3])
        .collect();
    let deltas: Vec<i64> = match i % 2 {
        1 => vec![-i, i],
        _ => Vec::new(),
    };
    serde_json::json!({
        "id": i, "tags": tags, "counts": counts, "items": items, "kinds": kinds,
        "deltas": deltas,
    })
}

#[test]
fn repeated_fields_are_arrays_read_from_and_written_for_protoc_generated_code() {
    let broker = Broker::start();
    broker.create_topic("baskets", 2);
    broker.create_topic("baskets_out", 1);
    let scratch = Scratch::new("protobuf-arrays");
    let dir = compile(&scratch, "baskets", BASKETS);
    python(&format!(
        r#"
import sys
sys.path.insert(0, '{dir}')
import orders_pb2 as pb
from confluent_kafka import Producer
producer = Producer({{'bootstrap.servers': '{broker}'}})
for i in range(50):
    basket = pb.Basket(id=i, tags=['t%d' % j for j in range(i % 4)],
        counts=[i * j - 7 for j in range(i % 5)], kinds=[j % 3 for j in range(i % 4)],
        deltas=[-i, i] if i % 2 else [])
    for j in range(i % 3):
        basket.items.add(sku='s%d_%d' % (i, j), price=j * 0.25, sizes=list(range(j)))
    producer.produce('baskets', value=basket.SerializeToString())
producer.flush(30)
"#,
        dir = dir.display(),
        broker = broker.address
    ));
    let columns = "id BIGINT, tags ARRAY<STRING>, counts ARRAY<BIGINT>,
        items ARRAY<ROW<sku STRING, price DOUBLE, sizes INT ARRAY>>, kinds ARRAY<STRING>,
        deltas ARRAY<INT>";
    let table = |name: &str, extra: &str| {
        format!(
            "CREATE TABLE {name} ({columns}) WITH ('connector' = 'kafka', 'topic' = '{name}',
               'properties.bootstrap.servers' = '{}', 'format' = 'protobuf',
               'protobuf.descriptor-file' = '{}/orders.desc',
               'protobuf.message-name' = 'shop.Basket'{extra});",
            broker.address,
            dir.display()
        )
    };
    let out = scratch.path().join("out");
    let script = format!(
        "SET 'execution.checkpointing.interval' = '200ms';
         {} {}
         CREATE TABLE out ({columns}, n INT, first_tag STRING, second_count BIGINT,
           pair ARRAY<BIGINT>) WITH ('connector' = 'filesystem', 'path' = '{}',
           'format' = 'json');
         INSERT INTO out SELECT *, CARDINALITY(tags), tags[1], counts[2], ARRAY[id, id + 1]
           FROM baskets;
         INSERT INTO baskets_out SELECT * FROM baskets WHERE id < 25;",
        table("baskets", ", 'scan.bounded.mode' = 'latest-offset'"),
        table(
            "baskets_out",
            ", 'sink.delivery-guarantee' = 'exactly-once'"
        ),
        out.display()
    );
    run_ok(&scratch, &script, 2);
    let mut read: Vec<serde_json::Value> = visible_lines(&out)
        .iter()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    read.sort_by_key(|row| row["id"].as_i64().unwrap());
    let expected: Vec<serde_json::Value> = (0..50)
        .map(|i| {
            let mut row = basket(i);
            let fields = row.as_object_mut().unwrap();
            fields.insert("n".into(), (i % 4).into());
            // NULLs (an index past the end) are left out of JSON.
            if i % 4 > 0 {
                fields.insert("first_tag".into(), "t0".into());
            }
            if i % 5 > 1 {
                fields.insert("second_count".into(), (i - 7).into());
            }
            fields.insert("pair".into(), serde_json::json!([i, i + 1]));
            row
        })
        .collect();
    assert_eq!(read, expected);

    // Eddy's records, parsed by the generated class.
    let parsed = python(&format!(
        r#"
import json, sys
sys.path.insert(0, '{dir}')
import orders_pb2 as pb
from confluent_kafka import Consumer
consumer = Consumer({{'bootstrap.servers': '{broker}', 'group.id': 'check',
    'auto.offset.reset': 'earliest', 'isolation.level': 'read_committed'}})
consumer.subscribe(['baskets_out'])
rows, idle = [], 0
while len(rows) < 25 and idle < 20:
    message = consumer.poll(1.0)
    if message is None or message.error():
        idle += 1
        continue
    b = pb.Basket()
    b.ParseFromString(message.value())
    rows.append(json.dumps({{'id': b.id, 'tags': list(b.tags), 'counts': list(b.counts),
        'items': [{{'sku': it.sku, 'price': it.price, 'sizes': list(it.sizes)}} for it in b.items],
        'kinds': [pb.Basket.Kind.Name(k) for k in b.kinds], 'deltas': list(b.deltas)}}))
print('\n'.join(rows))
"#,
        dir = dir.display(),
        broker = broker.address
    ));
    let mut got: Vec<serde_json::Value> = parsed
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    got.sort_by_key(|row| row["id"].as_i64().unwrap());
    let expected: Vec<serde_json::Value> = (0..25).map(basket).collect();
    assert_eq!(got, expected);
}
