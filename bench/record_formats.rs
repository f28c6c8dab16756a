//! Rows/s encoding and decoding Kafka records of bids in CSV, JSON, Avro and Protobuf, as
//! the Kafka connector does (1,024 records a batch, each record its own message), with no
//! broker in between: what the formats cost, apart from the transport. (Protobuf's
//! `date_time` is an int64 of milliseconds, `bench/bid.proto`: protobuf has no TIMESTAMP.)
//!
//! `cargo run --release --example record-formats -- [ROWS]`; prints one line per format.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use arrow::array::{ArrayRef, Int64Array, StringArray, TimestampMillisecondArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use arrow::record_batch::RecordBatch;
use eddy_common::metrics::OperatorMetrics;
use eddy_connectors::Options;
use eddy_connectors::format::{
    Format, LinePosition, MessageReader, MessageWriter, Messages, format_keys,
};

const BATCH: usize = 1024;

fn schema() -> SchemaRef {
    schema_with(DataType::Timestamp(TimeUnit::Millisecond, None))
}

/// The bids' columns, `date_time` of type `time`.
fn schema_with(time: DataType) -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("auction", DataType::Int64, false),
        Field::new("bidder", DataType::Int64, false),
        Field::new("price", DataType::Int64, false),
        Field::new("channel", DataType::Utf8, true),
        Field::new("url", DataType::Utf8, true),
        Field::new("date_time", time, true),
    ]))
}

/// Batch `b` of bids, deterministic.
fn bids(b: usize) -> RecordBatch {
    let ids = (b * BATCH..(b + 1) * BATCH).map(|i| i as i64);
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from_iter_values(
            ids.clone().map(|i| 1000 + i % 977),
        )),
        Arc::new(Int64Array::from_iter_values(
            ids.clone().map(|i| 2000 + i % 4093),
        )),
        Arc::new(Int64Array::from_iter_values(
            ids.clone().map(|i| i * 37 % 100_000),
        )),
        Arc::new(StringArray::from_iter_values(ids.clone().map(|i| {
            ["Google", "Facebook", "Baidu", "Apple"][i as usize % 4]
        }))),
        Arc::new(StringArray::from_iter_values(
            ids.clone()
                .map(|i| format!("https://www.nexmark.com/item.htm?query={i}")),
        )),
        Arc::new(TimestampMillisecondArray::from_iter_values(
            ids.map(|i| 1_704_067_200_000 + i),
        )),
    ];
    RecordBatch::try_new(schema(), columns).expect("bids")
}

fn format(name: &str, extra: &[(&str, &str)]) -> anyhow::Result<Format> {
    let mut values: BTreeMap<String, String> = [("format".to_string(), name.to_string())].into();
    values.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    let options = Options::validate("bids", "kafka", &values, &format_keys(), &[])?;
    Ok(Format::from_options(&options)?.0)
}

fn main() -> anyhow::Result<()> {
    let rows: usize = std::env::args()
        .nth(1)
        .map(|n| n.parse())
        .transpose()?
        .unwrap_or(2_000_000);
    let batches: Vec<RecordBatch> = (0..rows.div_ceil(BATCH)).map(bids).collect();
    let rows = batches.len() * BATCH;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let metrics = OperatorMetrics::default();
    let at = LinePosition {
        file: "bench",
        first_line: 1,
    };
    for name in ["csv", "json"] {
        let format = format(name, &[])?;
        let started = Instant::now();
        let mut encoded = Vec::with_capacity(batches.len());
        for batch in &batches {
            let mut lines = Vec::new();
            format.encode(batch, &mut lines)?;
            lines.pop();
            encoded.push(lines);
        }
        let encode = started.elapsed();
        let bytes: usize = encoded.iter().map(Vec::len).sum();
        let started = Instant::now();
        let mut decoded = 0;
        for lines in &encoded {
            let chunk = format.decode(&schema(), lines, at, false, &metrics)?;
            decoded += chunk.map_or(0, |c| c.num_rows());
        }
        report(name, rows, decoded, bytes, encode, started.elapsed());
    }
    let descriptors = concat!(env!("CARGO_MANIFEST_DIR"), "/bench/bid.desc");
    let protobuf = [
        ("protobuf.descriptor-file", descriptors),
        ("protobuf.message-name", "nexmark.Bid"),
    ];
    let framed = [
        ("avro", format("avro", &[])?, schema()),
        (
            "protobuf",
            format("protobuf", &protobuf)?,
            schema_with(DataType::Int64),
        ),
    ];
    for (name, format, schema) in framed {
        let batches: Vec<RecordBatch> = batches
            .iter()
            .map(|b| RecordBatch::try_new(schema.clone(), b.columns().to_vec()))
            .collect::<Result<_, _>>()
            .or_else(|_| {
                batches
                    .iter()
                    .map(|b| with_millis(b, &schema))
                    .collect::<anyhow::Result<_>>()
            })?;
        let mut writer = MessageWriter::new(&format, "bids", &schema).expect("framed")?;
        let started = Instant::now();
        let mut encoded = Vec::with_capacity(batches.len());
        for batch in &batches {
            let mut records = Messages::default();
            runtime.block_on(writer.encode(batch, &mut records))?;
            encoded.push(records);
        }
        let encode = started.elapsed();
        let bytes: usize = encoded.iter().map(Messages::byte_len).sum();
        let mut reader = MessageReader::new(&format, &schema, BATCH).expect("framed")?;
        // As the Kafka source gathers them (Avro's behind the decoder's header).
        let gathered: Vec<Messages> = encoded
            .iter()
            .map(|records| {
                let mut out = Messages::default();
                for record in records.iter() {
                    out.push_prefixed(reader.record_prefix(), record);
                }
                out
            })
            .collect();
        let started = Instant::now();
        let mut decoded = 0;
        for records in &gathered {
            let chunk = reader.decode(records, at, false, &metrics, false)?;
            decoded += chunk.map_or(0, |d| d.chunk.num_rows());
        }
        report(name, rows, decoded, bytes, encode, started.elapsed());
    }
    Ok(())
}

fn report(
    name: &str,
    rows: usize,
    decoded: usize,
    bytes: usize,
    encode: std::time::Duration,
    decode: std::time::Duration,
) {
    assert_eq!(decoded, rows, "{name}: every row decoded");
    println!(
        "{name:>5}: encode {:.2} M rows/s, decode {:.2} M rows/s, {:.1} bytes/row",
        rows as f64 / encode.as_secs_f64() / 1e6,
        rows as f64 / decode.as_secs_f64() / 1e6,
        bytes as f64 / rows as f64
    );
}

/// `batch` with `date_time` as an int64 of milliseconds.
fn with_millis(batch: &RecordBatch, schema: &SchemaRef) -> anyhow::Result<RecordBatch> {
    let mut columns = batch.columns().to_vec();
    columns[5] = arrow::compute::cast(&columns[5], &DataType::Int64)?;
    Ok(RecordBatch::try_new(schema.clone(), columns)?)
}
