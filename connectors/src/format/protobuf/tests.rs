//! The Protobuf format against the messages of `testdata/orders.proto`.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, BinaryArray, BooleanArray, Float32Array, Float64Array, Int32Array,
    Int64Array, StringArray, StructArray,
};
use arrow::datatypes::{DataType, Field, Fields, Schema};
use proptest::prelude::*;

use super::wire::{WireType, put_delimited, put_tag, put_varint};
use super::*;

const DESCRIPTORS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/src/format/protobuf/testdata/orders.desc"
);

fn protobuf(message: &str, extra: &[(&str, &str)]) -> Result<ProtobufFormat> {
    let mut values: BTreeMap<String, String> = [
        ("format", "protobuf"),
        ("protobuf.descriptor-file", DESCRIPTORS),
        ("protobuf.message-name", message),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    values.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    let keys: Vec<&str> = KEYS.iter().copied().chain(["format"]).collect();
    let options = Options::validate("t", "kafka", &values, &keys, &[])?;
    ProtobufFormat::from_options(&options)
}

fn address_fields() -> Fields {
    Fields::from(vec![
        Field::new("city", DataType::Utf8, true),
        Field::new("zip", DataType::Int32, true),
    ])
}

fn table() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("customer", DataType::Utf8, true),
        Field::new("quantity", DataType::Int32, true),
        Field::new("price", DataType::Float64, true),
        Field::new("paid", DataType::Boolean, true),
        Field::new("status", DataType::Utf8, true),
        Field::new("address", DataType::Struct(address_fields()), true),
        Field::new("note", DataType::Utf8, true),
        Field::new("payload", DataType::Binary, true),
        Field::new("shard", DataType::Int64, true),
        Field::new("weight", DataType::Float32, true),
        Field::new("sequence", DataType::Int64, true),
        Field::new("email", DataType::Utf8, true),
    ]))
}

/// Three orders: everything set; proto3 scalars at their defaults and NULLs; extremes.
fn orders() -> RecordBatch {
    let address = StructArray::new(
        address_fields(),
        vec![
            Arc::new(StringArray::from(vec![Some("Oslo"), None, Some("")])) as ArrayRef,
            Arc::new(Int32Array::from(vec![Some(150), None, Some(-1)])),
        ],
        Some(vec![true, false, true].into()),
    );
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from(vec![1, 0, i64::MIN])),
        Arc::new(StringArray::from(vec![Some("ann\n"), Some(""), Some("é")])),
        Arc::new(Int32Array::from(vec![Some(-3), Some(0), Some(i32::MIN)])),
        Arc::new(Float64Array::from(vec![Some(9.5), Some(0.0), Some(-1e300)])),
        Arc::new(BooleanArray::from(vec![
            Some(true),
            Some(false),
            Some(true),
        ])),
        Arc::new(StringArray::from(vec![
            Some("PAID"),
            Some("NEW"),
            Some("SHIPPED"),
        ])),
        Arc::new(address),
        Arc::new(StringArray::from(vec![
            Some("leave at door"),
            None,
            Some(""),
        ])),
        Arc::new(BinaryArray::from(vec![
            Some(&b"\x00\xff"[..]),
            Some(b""),
            Some(b"x"),
        ])),
        Arc::new(Int64Array::from(vec![
            Some(7),
            Some(0),
            Some(i64::from(u32::MAX)),
        ])),
        Arc::new(Float32Array::from(vec![
            Some(0.5),
            Some(0.0),
            Some(f32::MAX),
        ])),
        Arc::new(Int64Array::from(vec![Some(1), Some(0), Some(-1)])),
        Arc::new(StringArray::from(vec![Some("a@b.c"), None, Some("")])),
    ];
    RecordBatch::try_new(table(), columns).unwrap()
}

fn at() -> LinePosition<'static> {
    LinePosition {
        file: "topic 'orders' partition 0, offset",
        first_line: 40,
    }
}

fn decode_all(
    reader: &mut ProtobufReader,
    records: &Messages,
    ignore: bool,
) -> Result<Option<RecordBatch>> {
    let metrics = OperatorMetrics::default();
    let decoded = reader.decode(records, at(), ignore, &metrics, false)?;
    Ok(decoded.map(|d| d.chunk.rows().clone()))
}

/// `records` of `message` read as `schema` with `protobuf.read-default-values`.
fn read_defaults(message: &str, schema: &SchemaRef, records: &Messages) -> RecordBatch {
    let format = protobuf(message, &[("protobuf.read-default-values", "true")]).unwrap();
    decode_all(&mut format.reader(schema).unwrap(), records, false)
        .unwrap()
        .unwrap()
}

#[test]
fn rows_round_trip_and_absent_fields_read_as_proto3_says() {
    let format = protobuf("eddy.test.Order", &[]).unwrap();
    let mut records = Messages::default();
    format
        .writer(&table())
        .unwrap()
        .encode(&orders(), &mut records)
        .unwrap();
    // The second order is all proto3 defaults and NULLs: nothing is written of it.
    assert_eq!(records.iter().nth(1).unwrap(), &[] as &[u8]);
    let mut reader = format.reader(&table()).unwrap();
    let read = decode_all(&mut reader, &records, false).unwrap().unwrap();
    assert_eq!(read, orders());
}

#[test]
fn null_scalars_of_proto3_read_back_as_defaults_and_fields_with_presence_as_null() {
    let format = protobuf("eddy.test.Order", &[]).unwrap();
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("status", DataType::Utf8, true),
        Field::new("note", DataType::Utf8, true),
        Field::new("address", DataType::Struct(address_fields()), true),
        Field::new("phone", DataType::Utf8, true),
    ]));
    let mut reader = format.reader(&schema).unwrap();
    let mut records = Messages::default();
    records.push(&[]);
    let read = decode_all(&mut reader, &records, false).unwrap().unwrap();
    assert_eq!(
        read.column(0).as_ref(),
        &Int64Array::from(vec![0]) as &dyn arrow::array::Array
    );
    assert_eq!(
        read.column(1).as_ref(),
        &StringArray::from(vec!["NEW"]) as &dyn arrow::array::Array
    );
    assert!(read.column(2).is_null(0) && read.column(3).is_null(0) && read.column(4).is_null(0));
    // With read-default-values, fields with presence read as their defaults too.
    let read = read_defaults("eddy.test.Order", &schema, &records);
    assert_eq!(
        read.column(2).as_ref(),
        &StringArray::from(vec![""]) as &dyn arrow::array::Array
    );
    assert!(read.column(3).is_valid(0));
}

#[test]
fn proto2_defaults_are_read_when_asked_for() {
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("label", DataType::Utf8, true),
        Field::new("count", DataType::Int32, true),
    ]));
    let mut record = Vec::new();
    put_tag(&mut record, 1, WireType::Varint);
    put_varint(&mut record, 5);
    let mut records = Messages::default();
    records.push(&record);
    let read = decode_all(
        &mut protobuf("eddy.test.Legacy", &[])
            .unwrap()
            .reader(&schema)
            .unwrap(),
        &records,
        false,
    )
    .unwrap()
    .unwrap();
    assert!(read.column(1).is_null(0) && read.column(2).is_null(0));
    let read = read_defaults("eddy.test.Legacy", &schema, &records);
    assert_eq!(
        read.column(1).as_ref(),
        &StringArray::from(vec!["none"]) as &dyn arrow::array::Array
    );
    assert_eq!(
        read.column(2).as_ref(),
        &Int32Array::from(vec![7]) as &dyn arrow::array::Array
    );
}

#[test]
fn unknown_fields_are_skipped_and_repeated_fields_merge_as_protobuf_merges_them() {
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("address", DataType::Struct(address_fields()), true),
        Field::new("status", DataType::Utf8, true),
    ]));
    let mut record = Vec::new();
    put_tag(&mut record, 1, WireType::Varint);
    put_varint(&mut record, 1);
    // Fields a newer writer added: a varint, a string, a fixed32, a group.
    put_tag(&mut record, 99, WireType::Varint);
    put_varint(&mut record, 300);
    put_delimited(&mut record, 100, b"new");
    put_tag(&mut record, 101, WireType::Fixed32);
    record.extend_from_slice(&[1, 2, 3, 4]);
    record.extend_from_slice(&[0xb3, 0x06, 0x08, 0x01, 0xb4, 0x06]);
    // The address in two parts (merged), the id again (the last wins), an enum number
    // this descriptor lacks.
    put_delimited(&mut record, 7, &[0x0a, 0x01, b'A']);
    put_delimited(&mut record, 7, &[0x10, 0x05]);
    put_tag(&mut record, 1, WireType::Varint);
    put_varint(&mut record, 2);
    put_tag(&mut record, 6, WireType::Varint);
    put_varint(&mut record, 9);
    let mut records = Messages::default();
    records.push(&record);
    let format = protobuf("eddy.test.Order", &[]).unwrap();
    let read = decode_all(&mut format.reader(&schema).unwrap(), &records, false)
        .unwrap()
        .unwrap();
    let address = StructArray::new(
        address_fields(),
        vec![
            Arc::new(StringArray::from(vec!["A"])) as ArrayRef,
            Arc::new(Int32Array::from(vec![5])),
        ],
        None,
    );
    let expected = RecordBatch::try_new(
        schema,
        vec![
            Arc::new(Int64Array::from(vec![2])),
            Arc::new(address),
            Arc::new(StringArray::from(vec!["9"])),
        ],
    )
    .unwrap();
    assert_eq!(read, expected);
}

#[test]
fn malformed_records_fail_naming_offset_and_byte_or_are_skipped() {
    let format = protobuf("eddy.test.Order", &[]).unwrap();
    let mut good = Messages::default();
    format
        .writer(&table())
        .unwrap()
        .encode(&orders(), &mut good)
        .unwrap();
    let first = good.iter().next().unwrap().to_vec();
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (first[..first.len() - 1].to_vec(), "runs past the end"),
        (vec![0x0a, 0x01, b'x'], "wire type 2, its type wire type 0"),
        (
            vec![0x12, 0x02, 0xff, 0xfe],
            "field 2 is not UTF-8 at byte 2",
        ),
        (vec![0x0f], "wire type 7 is not valid"),
        (vec![0x00, 0x01], "field number 0"),
        (vec![0x3a, 0x02, 0x10], "runs past the end"),
    ];
    for (bad, expected) in cases {
        let mut records = Messages::default();
        records.push(&first);
        records.push(&bad);
        records.push(&first);
        let mut reader = format.reader(&table()).unwrap();
        let error = decode_all(&mut reader, &records, false)
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("offset at line 41") && error.contains(expected),
            "{expected}: {error}"
        );
        // The reader goes on after a failure, and skips what it cannot read.
        let read = decode_all(&mut reader, &records, true).unwrap().unwrap();
        assert_eq!(read.num_rows(), 2, "{expected}");
        assert_eq!(
            read.column(0).as_ref(),
            &Int64Array::from(vec![1, 1]) as &dyn arrow::array::Array
        );
    }
}

#[test]
fn tables_the_message_cannot_hold_and_bad_options_are_refused() {
    let refused = |fields: Vec<Field>| {
        let schema = Arc::new(Schema::new(fields));
        protobuf("eddy.test.Order", &[])
            .unwrap()
            .reader(&schema)
            .unwrap_err()
            .to_string()
    };
    let error = refused(vec![Field::new("tags", DataType::Utf8, true)]);
    assert!(
        error.contains("field 'tags' is repeated: the column must be an ARRAY, not STRING"),
        "{error}"
    );
    let error = refused(vec![Field::new("id", DataType::Int32, true)]);
    assert!(
        error.contains("a column of type INT cannot hold field 'id' of type int64"),
        "{error}"
    );
    let error = refused(vec![Field::new("missing", DataType::Utf8, true)]);
    assert!(
        error.contains("message eddy.test.Order has no field 'missing'"),
        "{error}"
    );
    let error = refused(vec![Field::new("address", DataType::Utf8, true)]);
    assert!(error.contains("the column must be a ROW"), "{error}");
    let nested = Field::new(
        "address",
        DataType::Struct(vec![Field::new("town", DataType::Utf8, true)].into()),
        true,
    );
    let error = refused(vec![nested]);
    assert!(error.contains("column 'address.town'"), "{error}");
    let error = protobuf("eddy.test.Nope", &[]).unwrap_err().to_string();
    assert!(
        error.contains("eddy.test.Address, eddy.test.Basket, eddy.test.Basket.Item"),
        "{error}"
    );
    let error = protobuf(
        "eddy.test.Order",
        &[("protobuf.message-class-name", "com.x.Order")],
    )
    .unwrap_err()
    .to_string();
    assert!(error.contains("loads no Java classes"), "{error}");
}

fn list(element: DataType) -> DataType {
    DataType::List(Arc::new(Field::new_list_field(element, true)))
}

fn basket_table() -> SchemaRef {
    let item = DataType::Struct(Fields::from(vec![
        Field::new("sku", DataType::Utf8, true),
        Field::new("price", DataType::Float64, true),
        Field::new("sizes", list(DataType::Int32), true),
    ]));
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("tags", list(DataType::Utf8), true),
        Field::new("counts", list(DataType::Int64), true),
        Field::new("deltas", list(DataType::Int32), true),
        Field::new("items", list(item), true),
        Field::new("kinds", list(DataType::Utf8), true),
        Field::new("weights", list(DataType::Float64), true),
    ]))
}

/// Rows of `basket_table` from JSON lines.
fn baskets(lines: &str) -> RecordBatch {
    let mut reader = arrow::json::ReaderBuilder::new(basket_table())
        .build(std::io::Cursor::new(lines.as_bytes().to_vec()))
        .unwrap();
    reader.next().unwrap().unwrap()
}

fn write_baskets(rows: &RecordBatch) -> Messages {
    let format = protobuf("eddy.test.Basket", &[]).unwrap();
    let mut records = Messages::default();
    format
        .writer(&basket_table())
        .unwrap()
        .encode(rows, &mut records)
        .unwrap();
    records
}

fn read_baskets(records: &Messages) -> Result<Option<RecordBatch>> {
    let format = protobuf("eddy.test.Basket", &[]).unwrap();
    decode_all(&mut format.reader(&basket_table()).unwrap(), records, false)
}

/// The (field number, wire type) of each field of `record`, in order.
fn wire_fields(record: &[u8]) -> Vec<(u32, WireType)> {
    let mut reader = super::wire::WireReader::new(record, 0, record.len());
    let mut fields = Vec::new();
    while let Some((number, wire_type, _)) = reader.next_field().unwrap() {
        fields.push((number, wire_type));
    }
    fields
}

#[test]
fn arrays_round_trip_as_repeated_fields_packed_where_the_field_is() {
    let rows = baskets(
        r#"{"id":1,"tags":["a","","b"],"counts":[0,1,-5,300],"deltas":[-1,0,2],"items":[{"sku":"x","price":1.5,"sizes":[1,2]},{"sku":"","price":0.0,"sizes":[]}],"kinds":["FRUIT","NONE","TOOL"],"weights":[0.5,-0.0]}
{"id":2,"tags":[],"counts":[],"deltas":[],"items":[],"kinds":[],"weights":[]}
{"id":3,"tags":["only"],"counts":[9],"deltas":[],"items":[{"sku":"y","price":2.0,"sizes":[3]}],"kinds":[],"weights":[1e300]}"#,
    );
    let records = write_baskets(&rows);
    let fields = wire_fields(records.iter().next().unwrap());
    let count = |field: (u32, WireType)| fields.iter().filter(|f| **f == field).count();
    // proto3 packs scalars unless the field says not to; strings and messages never pack.
    assert_eq!(count((3, WireType::Delimited)), 1, "{fields:?}");
    assert_eq!(count((4, WireType::Varint)), 3, "{fields:?}");
    assert_eq!(count((2, WireType::Delimited)), 3, "{fields:?}");
    assert_eq!(count((5, WireType::Delimited)), 2, "{fields:?}");
    // Empty arrays write nothing.
    assert_eq!(records.iter().nth(1).unwrap(), [0x08, 0x02]);
    assert_eq!(read_baskets(&records).unwrap().unwrap(), rows);
}

#[test]
fn repeated_fields_read_packed_and_unpacked_runs_in_order_and_absent_as_empty() {
    let mut record = Vec::new();
    put_tag(&mut record, 1, WireType::Varint);
    put_varint(&mut record, 7);
    // counts: 7 alone, then a packed run of 8 and 9, then 10 alone.
    put_tag(&mut record, 3, WireType::Varint);
    put_varint(&mut record, 7);
    put_delimited(&mut record, 3, &[8, 9]);
    put_tag(&mut record, 3, WireType::Varint);
    put_varint(&mut record, 10);
    // deltas, declared unpacked, in a packed run (zigzag -1, 1).
    put_delimited(&mut record, 4, &[0x01, 0x02]);
    // Two items, each a whole message (not merged as a singular message would be).
    put_delimited(&mut record, 5, &[0x0a, 0x01, b'p', 0x1a, 0x02, 0x04, 0x05]);
    put_delimited(&mut record, 5, &[0x1a, 0x01, 0x06]);
    // An enum number the descriptor lacks, and a tag between the elements.
    put_tag(&mut record, 6, WireType::Varint);
    put_varint(&mut record, 2);
    put_delimited(&mut record, 2, b"t");
    put_tag(&mut record, 6, WireType::Varint);
    put_varint(&mut record, 5);
    let mut records = Messages::default();
    records.push(&record);
    records.push(&[]);
    let expected = baskets(
        r#"{"id":7,"tags":["t"],"counts":[7,8,9,10],"deltas":[-1,1],"items":[{"sku":"p","price":0.0,"sizes":[4,5]},{"sku":"","price":0.0,"sizes":[6]}],"kinds":["TOOL","5"],"weights":[]}
{"id":0,"tags":[],"counts":[],"deltas":[],"items":[],"kinds":[],"weights":[]}"#,
    );
    assert_eq!(read_baskets(&records).unwrap().unwrap(), expected);
}

#[test]
fn null_arrays_and_elements_are_written_as_protobuf_can_hold_them() {
    // A NULL ARRAY is an empty field; a NULL element is its type's default (Flink's way).
    let rows = baskets(
        r#"{"id":1,"tags":null,"counts":[null,4],"deltas":[null],"items":[null],"kinds":[null,"TOOL"],"weights":[null]}"#,
    );
    let records = write_baskets(&rows);
    let expected = baskets(
        r#"{"id":1,"tags":[],"counts":[0,4],"deltas":[0],"items":[{"sku":"","price":0.0,"sizes":[]}],"kinds":["NONE","TOOL"],"weights":[0.0]}"#,
    );
    assert_eq!(read_baskets(&records).unwrap().unwrap(), expected);
}

#[test]
fn malformed_repeated_fields_fail_naming_the_byte_and_change_no_column() {
    let cases: Vec<(Vec<u8>, &str)> = vec![
        // A packed run whose last varint is cut.
        (
            vec![0x1a, 0x02, 0x01, 0x80],
            "a varint runs past the end at byte 4",
        ),
        // A packed run of fixed64 values (doubles) one byte short.
        (vec![0x3a, 0x03, 0, 0, 0], "(3 bytes left) at byte 2"),
        // An item whose string runs past the item's end.
        (
            vec![0x2a, 0x03, 0x0a, 0x05, b'a'],
            "(1 bytes left) at byte 4",
        ),
        // A tag that is not UTF-8.
        (
            vec![0x12, 0x01, 0xff],
            "an element of field 2 is not UTF-8 at byte 2",
        ),
    ];
    for (bad, expected) in cases {
        let mut good = Vec::new();
        put_delimited(&mut good, 3, &[1, 2]);
        let mut records = Messages::default();
        records.push(&good);
        records.push(&bad);
        let error = read_baskets(&records).unwrap_err().to_string();
        assert!(error.contains(expected), "{expected}: {error}");
        // Skipped, the bad record leaves the good one's row whole.
        let format = protobuf("eddy.test.Basket", &[]).unwrap();
        let mut reader = format.reader(&basket_table()).unwrap();
        let read = decode_all(&mut reader, &records, true).unwrap().unwrap();
        assert_eq!(read.num_rows(), 1);
        let counts = read.column(2).as_list::<i32>();
        assert_eq!(
            counts
                .value(0)
                .as_primitive::<arrow::datatypes::Int64Type>()
                .values(),
            &[1, 2]
        );
    }
}

#[test]
fn arrays_are_refused_where_the_fields_are_not_repeated_and_maps_are_named() {
    let refused = |field: Field| {
        let schema = Arc::new(Schema::new(vec![field]));
        protobuf("eddy.test.Basket", &[])
            .unwrap()
            .reader(&schema)
            .unwrap_err()
            .to_string()
    };
    let error = refused(Field::new("id", list(DataType::Int64), true));
    assert!(error.contains("field 'id' is not repeated"), "{error}");
    let error = refused(Field::new("totals", list(DataType::Int64), true));
    assert!(error.contains("field 'totals' is a map"), "{error}");
    let error = refused(Field::new("counts", list(DataType::Utf8), true));
    assert!(
        error.contains("a column of type STRING cannot hold field 'counts' of type int64"),
        "{error}"
    );
}

proptest! {
    #![proptest_config(eddy_common::fuzz::config("format::protobuf_records"))]

    /// Valid records with bytes overwritten or cut, and arbitrary bytes: rows or an
    /// error, never a panic, and the reader stays usable.
    #[test]
    fn mutated_records_never_panic(
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..6),
        cut in any::<prop::sample::Index>(),
        noise in proptest::collection::vec(any::<u8>(), 0..64),
    ) {
        let format = protobuf("eddy.test.Order", &[]).unwrap();
        let mut good = Messages::default();
        format.writer(&table()).unwrap().encode(&orders(), &mut good).unwrap();
        let mut bytes: Vec<Vec<u8>> = good.iter().map(<[u8]>::to_vec).collect();
        for (at, value) in edits {
            let record = at.index(bytes.len());
            if !bytes[record].is_empty() {
                let i = at.index(bytes[record].len());
                bytes[record][i] = value;
            }
        }
        let keep = cut.index(bytes[0].len() + 1);
        bytes[0].truncate(keep);
        bytes.push(noise);
        let mut records = Messages::default();
        for record in &bytes {
            records.push(record);
        }
        let mut reader = format.reader(&table()).unwrap();
        let _ = decode_all(&mut reader, &records, false);
        if let Ok(Some(rows)) = decode_all(&mut reader, &records, true) {
            prop_assert!(rows.num_rows() <= 4);
        }
    }
}
