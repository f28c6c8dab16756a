//! The Avro formats: round trips, schema resolution, Debezium envelopes, hostile records.

use std::collections::BTreeMap as Map;

use arrow::array::{
    Array, ArrayRef, BinaryArray, BooleanArray, Date32Array, Decimal128Array, Float64Array,
    Int16Array, Int32Array, Int64Array, StringArray, StructArray, TimestampMillisecondArray,
};
use arrow::datatypes::{DataType, Field, Fields, TimeUnit};
use arrow::record_batch::RecordBatch;
use arrow_avro::schema::{FingerprintStrategy, SCHEMA_METADATA_KEY};
use arrow_avro::writer::WriterBuilder;
use arrow_avro::writer::format::AvroSoeFormat;
use eddy_common::chunk::{Chunk, Op};
use eddy_common::metrics::OperatorMetrics;
use proptest::prelude::*;

use super::*;
use crate::format::{LinePosition, Messages};

fn options(values: &[(&str, &str)]) -> Map<String, String> {
    values
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn plain() -> AvroFormat {
    let values = options(&[("format", "avro")]);
    let keys: Vec<&str> = KEYS.iter().copied().chain(["format"]).collect();
    let options = Options::validate("t", "kafka", &values, &keys, &[]).unwrap();
    AvroFormat::plain(&options).unwrap()
}

fn table() -> SchemaRef {
    let city = Field::new("city", DataType::Utf8, true);
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("small", DataType::Int16, true),
        Field::new("ok", DataType::Boolean, true),
        Field::new("price", DataType::Decimal128(10, 2), true),
        Field::new("name", DataType::Utf8, true),
        Field::new("raw", DataType::Binary, true),
        Field::new("day", DataType::Date32, true),
        Field::new("ts", DataType::Timestamp(TimeUnit::Millisecond, None), true),
        Field::new("score", DataType::Float64, true),
        Field::new("address", DataType::Struct(vec![city.clone()].into()), true),
    ]))
}

fn rows() -> RecordBatch {
    let city = Field::new("city", DataType::Utf8, true);
    let address = StructArray::from(vec![(
        Arc::new(city),
        Arc::new(StringArray::from(vec![Some("Oslo"), None, Some("")])) as ArrayRef,
    )]);
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from(vec![1, -2, i64::MAX])),
        Arc::new(Int16Array::from(vec![Some(7), None, Some(-32768)])),
        Arc::new(BooleanArray::from(vec![Some(true), None, Some(false)])),
        Arc::new(
            Decimal128Array::from(vec![Some(12345), None, Some(-1)])
                .with_precision_and_scale(10, 2)
                .unwrap(),
        ),
        Arc::new(StringArray::from(vec![Some("a\nb"), None, Some("é")])),
        Arc::new(BinaryArray::from(vec![
            Some(&b"\x00\n"[..]),
            None,
            Some(b""),
        ])),
        Arc::new(Date32Array::from(vec![Some(19_723), None, Some(-1)])),
        Arc::new(TimestampMillisecondArray::from(vec![
            Some(1_704_153_573_004),
            None,
            Some(-1),
        ])),
        Arc::new(Float64Array::from(vec![Some(1.5), Some(f64::NAN), None])),
        Arc::new(address),
    ];
    RecordBatch::try_new(table(), columns).unwrap()
}

fn at() -> LinePosition<'static> {
    LinePosition {
        file: "topic 't' partition 0, offset",
        first_line: 100,
    }
}

/// Records as the Kafka source gathers them.
fn gathered(reader: &AvroReader, records: &Messages) -> Messages {
    let mut out = Messages::default();
    for record in records.iter() {
        out.push_prefixed(reader.record_prefix(), record);
    }
    out
}

async fn encoded(format: &AvroFormat, rows: &RecordBatch) -> Messages {
    let mut writer = format.writer(&rows.schema()).unwrap();
    let mut out = Messages::default();
    writer.encode(rows, &mut out).await.unwrap();
    out
}

fn decode(reader: &mut AvroReader, records: &Messages, ignore: bool) -> Result<Option<Chunk>> {
    let metrics = OperatorMetrics::default();
    let decoded = reader.decode(records, at(), ignore, &metrics, false)?;
    Ok(decoded.map(|d| d.chunk))
}

#[tokio::test]
async fn rows_round_trip_through_plain_avro_records() {
    let format = plain();
    let records = encoded(&format, &rows()).await;
    assert_eq!(records.len(), 3);
    // Small batches: the decoder fills and flushes between records.
    let mut reader = format.reader(&table(), 2).unwrap();
    let gathered = gathered(&reader, &records);
    let chunk = decode(&mut reader, &gathered, false).unwrap().unwrap();
    assert_eq!(chunk.rows(), &rows());
    // The same reader again (its decoder kept).
    let chunk = decode(&mut reader, &gathered, false).unwrap().unwrap();
    assert_eq!(chunk.num_rows(), 3);
}

fn array_table() -> SchemaRef {
    let item = DataType::Struct(Fields::from(vec![
        Field::new("sku", DataType::Utf8, true),
        Field::new("sizes", list_of(DataType::Int16, false), true),
    ]));
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("tags", list_of(DataType::Utf8, true), true),
        Field::new("items", list_of(item, true), true),
    ]))
}

fn list_of(element: DataType, nullable: bool) -> DataType {
    DataType::List(Arc::new(Field::new_list_field(element, nullable)))
}

/// Rows of `table` from JSON lines.
fn json_rows(table: &SchemaRef, lines: &str) -> RecordBatch {
    arrow::json::ReaderBuilder::new(table.clone())
        .build(std::io::Cursor::new(lines.as_bytes().to_vec()))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
}

const ARRAY_ROWS: &str = r#"{"id":1,"tags":["a",null,""],"items":[{"sku":"x","sizes":[1,-2]},null,{"sku":null,"sizes":[]}]}
{"id":2,"tags":[],"items":[]}
{"id":3,"tags":null,"items":null}"#;

#[tokio::test]
async fn arrays_round_trip_with_null_elements_and_rows_inside() {
    let table = array_table();
    let schema: serde_json::Value =
        serde_json::from_str(&schema::table_schema(table.fields(), true).unwrap()).unwrap();
    // As Flink derives it: a nullable ARRAY of nullable elements, its ROWs named by path.
    assert_eq!(
        schema["fields"][1]["type"],
        serde_json::json!(["null", {"type": "array", "items": ["null", "string"]}])
    );
    assert_eq!(
        schema["fields"][2]["type"][1]["items"][1]["name"],
        "record_items"
    );
    let rows = json_rows(&table, ARRAY_ROWS);
    let format = plain();
    let records = encoded(&format, &rows).await;
    let mut reader = format.reader(&table, 8).unwrap();
    let gathered = gathered(&reader, &records);
    let chunk = decode(&mut reader, &gathered, false).unwrap().unwrap();
    assert_eq!(chunk.rows(), &rows);
}

#[test]
fn arrays_of_records_another_writer_named_are_read_by_the_table() {
    // A writer (fastavro's, say) with its own record names, and an int array widened to
    // long in the table.
    let writer = r#"{"type": "record", "name": "Basket", "namespace": "shop", "fields": [
        {"name": "id", "type": "long"},
        {"name": "items", "type": {"type": "array", "items": {"type": "record",
          "name": "Item", "fields": [{"name": "sku", "type": "string"},
          {"name": "sizes", "type": {"type": "array", "items": "int"}}]}}}]}"#;
    let item = DataType::Struct(Fields::from(vec![
        Field::new("sku", DataType::Utf8, false),
        Field::new("sizes", list_of(DataType::Int32, false), false),
    ]));
    let written = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("items", list_of(item, false), false),
    ]));
    let rows = json_rows(
        &written,
        r#"{"id":5,"items":[{"sku":"a","sizes":[1,2]},{"sku":"b","sizes":[]}]}"#,
    );
    let records = confluent_records(&rows, writer, 4);
    let item = DataType::Struct(Fields::from(vec![
        Field::new("sku", DataType::Utf8, true),
        Field::new("sizes", list_of(DataType::Int64, true), true),
    ]));
    let table = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("items", list_of(item, true), true),
    ]));
    let mut reader = confluent_reader(&table, &[(4, writer)]);
    let chunk = decode(&mut reader, &records, false).unwrap().unwrap();
    let expected = json_rows(
        &table,
        r#"{"id":5,"items":[{"sku":"a","sizes":[1,2]},{"sku":"b","sizes":[]}]}"#,
    );
    assert_eq!(chunk.rows(), &expected);
}

/// The Confluent framing of `rows` written by `schema` (an Avro schema) as id `id`.
fn confluent_records(rows: &RecordBatch, schema: &str, id: u32) -> Messages {
    let metadata = [(SCHEMA_METADATA_KEY.to_string(), schema.to_string())].into();
    let arrow = Schema::new_with_metadata(rows.schema().fields().clone(), metadata);
    let mut encoder = WriterBuilder::new(arrow)
        .with_fingerprint_strategy(FingerprintStrategy::Id(id))
        .build_encoder::<AvroSoeFormat>()
        .unwrap();
    encoder.encode(rows).unwrap();
    let mut out = Messages::default();
    for record in encoder.flush().iter() {
        out.push(&record);
    }
    out
}

fn confluent_reader(table: &SchemaRef, writers: &[(u32, &str)]) -> AvroReader {
    let values = options(&[
        ("format", "avro-confluent"),
        ("avro-confluent.url", "http://127.0.0.1:1"),
    ]);
    let keys: Vec<&str> = KEYS.iter().copied().chain(["format"]).collect();
    let options = Options::validate("t", "kafka", &values, &keys, &[]).unwrap();
    let format = AvroFormat::confluent(&options).unwrap();
    let mut reader = format.reader(table, 1024).unwrap();
    for (id, schema) in writers {
        reader.know_writer(*id, schema);
    }
    reader
}

#[test]
fn records_of_older_and_newer_writer_schemas_are_read_by_the_table_schema() {
    let table = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("name", DataType::Utf8, true),
        Field::new("added", DataType::Utf8, true),
    ]));
    // Version 1: `id` an int, no `added`; version 2: an extra field the table lacks.
    let v1 = r#"{"type":"record","name":"r","fields":[
            {"name":"id","type":"int"},{"name":"name","type":["null","string"],"default":null}]}"#;
    let v2 = r#"{"type":"record","name":"r","fields":[
            {"name":"id","type":"long"},{"name":"extra","type":"double"},
            {"name":"name","type":["null","string"],"default":null},
            {"name":"added","type":["null","string"],"default":null}]}"#;
    let rows1 = RecordBatch::try_new(
        Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int32, false),
            Field::new("name", DataType::Utf8, true),
        ])),
        vec![
            Arc::new(Int32Array::from(vec![1, 2])),
            Arc::new(StringArray::from(vec![Some("a"), None])),
        ],
    )
    .unwrap();
    let rows2 = RecordBatch::try_new(
        Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("extra", DataType::Float64, false),
            Field::new("name", DataType::Utf8, true),
            Field::new("added", DataType::Utf8, true),
        ])),
        vec![
            Arc::new(Int64Array::from(vec![3])),
            Arc::new(Float64Array::from(vec![0.5])),
            Arc::new(StringArray::from(vec![Some("c")])),
            Arc::new(StringArray::from(vec![Some("new")])),
        ],
    )
    .unwrap();
    let mut records = Messages::default();
    let first = confluent_records(&rows1, v1, 7);
    let second = confluent_records(&rows2, v2, 8);
    // Interleaved ids: the decoder switches schemas between records.
    for record in [
        first.iter().next(),
        second.iter().next(),
        first.iter().nth(1),
    ] {
        records.push(record.unwrap());
    }
    let mut reader = confluent_reader(&table, &[(7, v1), (8, v2)]);
    let chunk = decode(&mut reader, &records, false).unwrap().unwrap();
    let expected = RecordBatch::try_new(
        table.clone(),
        vec![
            Arc::new(Int64Array::from(vec![1, 3, 2])),
            Arc::new(StringArray::from(vec![Some("a"), Some("c"), None])),
            Arc::new(StringArray::from(vec![None, Some("new"), None])),
        ],
    )
    .unwrap();
    assert_eq!(chunk.rows(), &expected);
}

#[test]
fn unreadable_records_fail_naming_the_offset_or_are_skipped_and_counted() {
    let table = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("name", DataType::Utf8, true),
    ]));
    let schema = schema::table_schema(table.fields(), true).unwrap();
    let rows = RecordBatch::try_new(
        table.clone(),
        vec![
            Arc::new(Int64Array::from(vec![1, 2, 3, 4, 5, 6])),
            Arc::new(StringArray::from(vec!["abcdef"; 6])),
        ],
    )
    .unwrap();
    let good = confluent_records(&rows, &schema, 1);
    let good: Vec<&[u8]> = good.iter().collect();
    // A schema whose `id` has no default and is missing: no record of it is readable.
    let other = r#"{"type":"record","name":"r","fields":[{"name":"x","type":"long"}]}"#;
    let mut unknown_id = good[2].to_vec();
    unknown_id[4] = 9;
    let mut other_id = good[3].to_vec();
    other_id[4] = 2;
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (good[0][..good[0].len() - 2].to_vec(), "not one value"),
        ([good[1], b"xx"].concat(), "not one value"),
        (unknown_id, "schema id 9 was not fetched"),
        (other_id, "cannot be read as the table's columns"),
        (Vec::new(), "an empty record"),
        (vec![0, 0, 0], "inside its 5-byte header"),
        (good[4][..5].to_vec(), "a header and no value"),
        (b"{\"id\":1}".to_vec(), "first byte is 0x7b"),
    ];
    for (bad, expected) in &cases {
        let mut records = Messages::default();
        records.push(good[5]);
        records.push(bad);
        records.push(good[4]);
        let mut reader = confluent_reader(&table, &[(1, &schema), (2, other)]);
        let error = decode(&mut reader, &records, false)
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("offset at line 101") && error.contains(expected),
            "{expected}: {error}"
        );
        let metrics = OperatorMetrics::default();
        let decoded = reader
            .decode(&records, at(), true, &metrics, true)
            .unwrap()
            .unwrap();
        assert_eq!(decoded.chunk.num_rows(), 2, "{expected}");
        assert_eq!(decoded.line_of_row, vec![0, 2]);
        assert_eq!(
            metrics
                .parse_errors_skipped
                .load(std::sync::atomic::Ordering::Relaxed),
            1
        );
    }
}

#[test]
fn bad_options_are_refused() {
    let keys: Vec<&str> = KEYS.iter().copied().chain(["format"]).collect();
    let confluent = |extra: &[(&str, &str)]| {
        let mut values = options(&[("format", "avro-confluent")]);
        values.extend(options(extra));
        let options = Options::validate("t", "kafka", &values, &keys, &[]).unwrap();
        AvroFormat::confluent(&options)
            .map(|_| ())
            .unwrap_err()
            .to_string()
    };
    assert!(confluent(&[]).contains("avro-confluent.url"));
    assert!(confluent(&[("avro-confluent.url", "localhost:8081")]).contains("http://"));
    let both = [
        ("avro-confluent.url", "http://r"),
        ("avro-confluent.basic-auth.user-info", "u:p"),
        ("avro-confluent.bearer-auth.token", "t"),
    ];
    assert!(confluent(&both).contains("exclude each other"));
    let no_colon = [
        ("avro-confluent.url", "http://r"),
        ("avro-confluent.basic-auth.user-info", "user"),
    ];
    assert!(confluent(&no_colon).contains("user:password"));
    let values = options(&[("format", "avro"), ("avro.encoding", "json")]);
    let options = Options::validate("t", "kafka", &values, &keys, &[]).unwrap();
    assert!(
        AvroFormat::plain(&options)
            .unwrap_err()
            .to_string()
            .contains("unsupported")
    );
}

/// Debezium's envelope schema of a `customers` table, as Debezium's Avro converter
/// writes it: `Value` defined in `before` and referenced in `after`, in a namespace.
const DEBEZIUM: &str = r#"{"type": "record", "name": "Envelope",
      "namespace": "dbserver1.inventory.customers", "fields": [
        {"name": "before", "type": ["null", {"type": "record", "name": "Value", "fields": [
            {"name": "id", "type": "int"},
            {"name": "name", "type": ["null", "string"], "default": null}]}],
         "default": null},
        {"name": "after", "type": ["null", "Value"], "default": null},
        {"name": "source", "type": {"type": "record", "name": "Source",
          "namespace": "io.debezium.connector.postgresql",
          "fields": [{"name": "db", "type": "string"}]}},
        {"name": "op", "type": "string"},
        {"name": "ts_ms", "type": ["null", "long"], "default": null}]}"#;

/// Envelopes of (before, after, op), as Debezium writes them with id 3.
type Change<'a> = (Option<(i32, &'a str)>, Option<(i32, &'a str)>, &'a str);

fn envelopes(changes: &[Change<'_>]) -> Messages {
    let value = Fields::from(vec![
        Field::new("id", DataType::Int32, false),
        Field::new("name", DataType::Utf8, true),
    ]);
    let image = |before: bool| {
        let images: Vec<Option<(i32, &str)>> = changes
            .iter()
            .map(|c| if before { c.0 } else { c.1 })
            .collect();
        StructArray::new(
            value.clone(),
            vec![
                Arc::new(Int32Array::from_iter_values(
                    images.iter().map(|i| i.map_or(0, |(id, _)| id)),
                )) as ArrayRef,
                Arc::new(StringArray::from_iter(
                    images.iter().map(|i| i.map(|(_, n)| n)),
                )),
            ],
            Some(
                images
                    .iter()
                    .map(Option::is_some)
                    .collect::<Vec<_>>()
                    .into(),
            ),
        )
    };
    let source = StructArray::from(vec![(
        Arc::new(Field::new("db", DataType::Utf8, false)),
        Arc::new(StringArray::from_iter_values(
            changes.iter().map(|_| "inventory"),
        )) as ArrayRef,
    )]);
    let schema = Arc::new(Schema::new(vec![
        Field::new("before", DataType::Struct(value.clone()), true),
        Field::new("after", DataType::Struct(value.clone()), true),
        Field::new("source", Array::data_type(&source).clone(), false),
        Field::new("op", DataType::Utf8, false),
        Field::new("ts_ms", DataType::Int64, true),
    ]));
    let rows = RecordBatch::try_new(
        schema,
        vec![
            Arc::new(image(true)),
            Arc::new(image(false)),
            Arc::new(source),
            Arc::new(StringArray::from_iter_values(changes.iter().map(|c| c.2))),
            Arc::new(Int64Array::from(vec![Some(5); changes.len()])),
        ],
    )
    .unwrap();
    confluent_records(&rows, DEBEZIUM, 3)
}

fn debezium_reader(table: &SchemaRef) -> AvroReader {
    let values = options(&[
        ("format", "debezium-avro-confluent"),
        ("debezium-avro-confluent.url", "http://127.0.0.1:1"),
    ]);
    let keys: Vec<&str> = KEYS.iter().copied().chain(["format"]).collect();
    let options = Options::validate("t", "kafka", &values, &keys, &[]).unwrap();
    let format = AvroFormat::debezium(&options).unwrap();
    assert!(format.is_changelog());
    let mut reader = format.reader(table, 1024).unwrap();
    reader.know_writer(3, DEBEZIUM);
    reader
}

#[test]
fn debezium_envelopes_become_changes_and_tombstones_nothing() {
    let table = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("name", DataType::Utf8, true),
    ]));
    let written = envelopes(&[
        (None, Some((1, "ann")), "r"),
        (None, Some((2, "bob")), "c"),
        (Some((1, "ann")), Some((1, "anne")), "u"),
        (Some((2, "bob")), None, "d"),
    ]);
    let mut records = Messages::default();
    for (i, record) in written.iter().enumerate() {
        records.push(record);
        if i == 3 {
            records.push(b""); // The tombstone after a delete.
        }
    }
    let mut reader = debezium_reader(&table);
    let metrics = OperatorMetrics::default();
    let decoded = reader
        .decode(&records, at(), false, &metrics, true)
        .unwrap()
        .unwrap();
    let ops: Vec<Op> = (0..decoded.chunk.num_rows())
        .map(|i| decoded.chunk.op(i))
        .collect();
    assert_eq!(
        ops,
        vec![
            Op::Insert,
            Op::Insert,
            Op::UpdateBefore,
            Op::UpdateAfter,
            Op::Delete
        ]
    );
    let expected = RecordBatch::try_new(
        table,
        vec![
            Arc::new(Int64Array::from(vec![1, 2, 1, 1, 2])),
            Arc::new(StringArray::from(vec!["ann", "bob", "ann", "anne", "bob"])),
        ],
    )
    .unwrap();
    assert_eq!(decoded.chunk.rows(), &expected);
    assert_eq!(decoded.line_of_row, vec![0, 1, 2, 2, 3]);
}

#[test]
fn envelopes_that_are_no_change_fail_naming_the_offset_or_are_skipped() {
    let table = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("name", DataType::Utf8, true),
    ]));
    let cases = [
        ((None, Some((1, "a")), "u"), "REPLICA IDENTITY FULL"),
        ((None, None, "d"), "REPLICA IDENTITY FULL"),
        ((None, None, "c"), "op 'c' without an \"after\" row"),
        ((None, Some((1, "a")), "t"), "unknown \"op\" value \"t\""),
    ];
    for (bad, expected) in cases {
        let records = envelopes(&[(None, Some((9, "z")), "c"), bad]);
        let mut reader = debezium_reader(&table);
        let metrics = OperatorMetrics::default();
        let error = reader
            .decode(&records, at(), false, &metrics, false)
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("offset at line 101") && error.contains(expected),
            "{error}"
        );
        let decoded = reader
            .decode(&records, at(), true, &metrics, false)
            .unwrap()
            .unwrap();
        assert_eq!(decoded.chunk.num_rows(), 1);
    }
}

proptest! {
    #![proptest_config(eddy_common::fuzz::config("format::avro_records"))]

    /// Records with bytes overwritten or cut: an error or rows, never a panic.
    #[test]
    fn mutated_records_never_panic(
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..6),
        cut in any::<prop::sample::Index>(),
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let format = plain();
        let records = runtime.block_on(encoded(&format, &rows()));
        let mut reader = format.reader(&table(), 2).unwrap();
        let mut bytes: Vec<Vec<u8>> = gathered(&reader, &records).iter().map(<[u8]>::to_vec).collect();
        for (at, value) in edits {
            let record = at.index(bytes.len());
            let i = at.index(bytes[record].len());
            bytes[record][i] = value;
        }
        let last = bytes.len() - 1;
        let keep = cut.index(bytes[last].len() + 1);
        bytes[last].truncate(keep);
        let mut mutated = Messages::default();
        for record in &bytes {
            mutated.push(record);
        }
        let _ = decode(&mut reader, &mutated, false);
        if let Ok(Some(chunk)) = decode(&mut reader, &mutated, true) {
            prop_assert!(chunk.num_rows() <= 3);
        }
    }
}
