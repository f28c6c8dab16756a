//! The Protobuf format against the messages of `testdata/orders.proto`.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{
    ArrayRef, BinaryArray, BooleanArray, Float32Array, Float64Array, Int32Array, Int64Array,
    StringArray, StructArray,
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
        error.contains("unsupported: field 'tags' is repeated"),
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
        error.contains("eddy.test.Address, eddy.test.Legacy, eddy.test.Order"),
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
