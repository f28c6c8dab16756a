//! Record formats of the filesystem and Kafka connectors: CSV ([`csv`]) and JSON, one
//! object a line ([`json`]), with Flink's options and semantics, so that files pass between
//! the two engines.

mod csv;
mod json;

use arrow::compute::concat_batches;
use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use eddy_common::metrics::OperatorMetrics;
use eddy_common::{EddyError, Result};

pub use self::csv::CsvFormat;
pub use self::json::JsonFormat;
use super::Options;

/// A record format.
#[derive(Debug, Clone)]
pub enum Format {
    /// Comma-separated values (no header line).
    Csv(CsvFormat),
    /// One JSON object a line.
    Json(JsonFormat),
}

/// The option keys formats understand.
pub fn format_keys() -> Vec<&'static str> {
    let mut keys = vec!["format", "format.ignore-parse-errors"];
    keys.extend_from_slice(csv::CSV_KEYS);
    keys.extend_from_slice(json::JSON_KEYS);
    keys
}

impl Format {
    /// Reads `format` and its options; returns the format and whether malformed records are
    /// skipped rather than failing the job.
    pub fn from_options(options: &Options<'_>) -> Result<(Format, bool)> {
        let format = match options.required("format")? {
            "csv" => Format::Csv(CsvFormat::from_options(options)?),
            "json" => Format::Json(JsonFormat::from_options(options)?),
            other => {
                return Err(
                    options.error(format!("option 'format' = '{other}': expected csv or json"))
                );
            }
        };
        let own_key = match format {
            Format::Csv(_) => "csv.ignore-parse-errors",
            Format::Json(_) => "json.ignore-parse-errors",
        };
        let ignore =
            options.flag("format.ignore-parse-errors", false)? || options.flag(own_key, false)?;
        Ok((format, ignore))
    }

    /// The file name extension.
    pub fn extension(&self) -> &'static str {
        match self {
            Format::Csv(_) => "csv",
            Format::Json(_) => "json",
        }
    }

    /// Decodes complete lines. A malformed record fails with its file and line, or is
    /// skipped and counted when `ignore_errors` is set.
    pub fn decode(
        &self,
        schema: &SchemaRef,
        lines: &[u8],
        location: LinePosition<'_>,
        ignore_errors: bool,
        metrics: &OperatorMetrics,
    ) -> Result<Option<RecordBatch>> {
        if let Ok(batch) = self.decode_all(schema, lines) {
            return Ok(batch);
        }
        // Find the bad records one line at a time.
        let mut good = Vec::new();
        for (i, line) in lines.split(|b| *b == b'\n').enumerate() {
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            match self.decode_all(schema, line) {
                Ok(Some(batch)) => good.push(batch),
                Ok(None) => {}
                Err(e) if ignore_errors => {
                    tracing::debug!(file = location.file, line = location.first_line + i as u64, error = %e, "skipping malformed record");
                    OperatorMetrics::add(&metrics.parse_errors_skipped, 1);
                }
                Err(e) => {
                    return Err(EddyError::Format {
                        file: location.file.to_string(),
                        line: location.first_line + i as u64,
                        message: clean_arrow_message(&e.to_string()),
                    });
                }
            }
        }
        if good.is_empty() {
            return Ok(None);
        }
        Ok(Some(concat_batches(schema, &good)?))
    }

    fn decode_all(
        &self,
        schema: &SchemaRef,
        bytes: &[u8],
    ) -> Result<Option<RecordBatch>, arrow::error::ArrowError> {
        let rows = bytes.iter().filter(|b| **b == b'\n').count() + 1;
        match self {
            Format::Csv(csv) => csv.decode(schema, bytes, rows),
            Format::Json(json) => json.decode(schema, bytes, rows),
        }
    }

    /// Appends the rows, encoded, to `out`.
    pub fn encode(&self, batch: &RecordBatch, out: &mut Vec<u8>) -> Result<()> {
        match self {
            Format::Csv(csv) => csv.encode(batch, out),
            Format::Json(json) => json.encode(batch, out),
        }
    }
}

/// Feeds `bytes` to a decoder (Arrow's CSV and JSON decoders take what they can each call)
/// until it takes no more.
fn feed(
    bytes: &[u8],
    mut decode: impl FnMut(&[u8]) -> Result<usize, arrow::error::ArrowError>,
) -> Result<(), arrow::error::ArrowError> {
    let mut rest = bytes;
    while !rest.is_empty() {
        let used = decode(rest)?;
        if used == 0 {
            break;
        }
        rest = &rest[used..];
    }
    Ok(())
}

/// Drops Arrow's own position (relative to the block it decoded, so misleading here).
fn clean_arrow_message(message: &str) -> String {
    let message = message.strip_prefix("Parser error: ").unwrap_or(message);
    match message.find(" at line ") {
        Some(at) => {
            let rest = &message[at + " at line ".len()..];
            let after = rest
                .find(|c: char| !c.is_ascii_digit())
                .map_or("", |i| &rest[i..]);
            format!("{}{after}", &message[..at])
        }
        None => message.to_string(),
    }
}

/// Where a block of lines starts, for error messages.
#[derive(Debug, Clone, Copy)]
pub struct LinePosition<'a> {
    /// The file.
    pub file: &'a str,
    /// The number of the block's first line, from 1.
    pub first_line: u64,
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{Int64Array, TimestampMillisecondArray};
    use arrow::datatypes::{DataType, Field, Schema, TimeUnit};

    use super::*;

    #[test]
    fn csv_timestamps_are_written_as_flink_reads_them_and_read_back() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, true),
            Field::new("ts", DataType::Timestamp(TimeUnit::Millisecond, None), true),
        ]));
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(Int64Array::from(vec![1, 2])),
                Arc::new(TimestampMillisecondArray::from(vec![
                    1_704_153_573_004,
                    1_704_067_200_000,
                ])),
            ],
        )
        .unwrap();
        let csv = Format::Csv(CsvFormat::default());
        let mut out = Vec::new();
        csv.encode(&batch, &mut out).unwrap();
        let text = String::from_utf8(out.clone()).unwrap();
        assert_eq!(
            text,
            "1,2024-01-01 23:59:33.004\n2,2024-01-01 00:00:00.000\n"
        );
        let position = LinePosition {
            file: "test.csv",
            first_line: 1,
        };
        let read = csv
            .decode(
                &schema,
                text.trim_end().as_bytes(),
                position,
                false,
                &OperatorMetrics::default(),
            )
            .unwrap()
            .unwrap();
        assert_eq!(read, batch);
    }

    mod hostile {
        use arrow::array::{BooleanArray, Float64Array, Int64Array, StringArray};
        use arrow::datatypes::{DataType, Field, Schema, TimeUnit};
        use proptest::collection::vec;
        use proptest::prelude::*;

        use super::*;

        fn schema() -> SchemaRef {
            Arc::new(Schema::new(vec![
                Field::new("id", DataType::Int64, true),
                Field::new("name", DataType::Utf8, true),
                Field::new("price", DataType::Float64, true),
                Field::new("ok", DataType::Boolean, true),
                Field::new("ts", DataType::Timestamp(TimeUnit::Millisecond, None), true),
            ]))
        }

        /// Valid records of [`schema`] in `format`, to mutate.
        fn valid(format: &Format) -> Vec<u8> {
            let batch = RecordBatch::try_new(
                schema(),
                vec![
                    Arc::new(Int64Array::from(vec![Some(1), None, Some(-3)])),
                    Arc::new(StringArray::from(vec![Some("a,\"b"), Some(""), None])),
                    Arc::new(Float64Array::from(vec![Some(1.5), Some(-0.0), None])),
                    Arc::new(BooleanArray::from(vec![Some(true), None, Some(false)])),
                    Arc::new(arrow::array::TimestampMillisecondArray::from(vec![
                        Some(1_704_153_573_004),
                        None,
                        Some(0),
                    ])),
                ],
            )
            .unwrap();
            let mut out = Vec::new();
            format.encode(&batch, &mut out).unwrap();
            out
        }

        /// Decodes `lines` both ways (failing, and skipping bad records): never a panic; a
        /// failure names the file and the line.
        fn check(format: &Format, lines: &[u8]) {
            let metrics = OperatorMetrics::default();
            let at = LinePosition {
                file: "hostile.txt",
                first_line: 7,
            };
            let line_count = lines.split(|b| *b == b'\n').count() as u64;
            if let Err(error) = format.decode(&schema(), lines, at, false, &metrics) {
                let text = error.to_string();
                let named = (7..7 + line_count)
                    .any(|l| text.contains(&format!("hostile.txt at line {l}:")));
                assert!(named, "the error names no line of the input: {text}");
            }
            let at = LinePosition {
                file: "hostile.txt",
                first_line: 7,
            };
            if let Ok(Some(batch)) = format.decode(&schema(), lines, at, true, &metrics) {
                assert_eq!(batch.schema(), schema());
            }
        }

        proptest! {
            #![proptest_config(eddy_common::fuzz::config("format::hostile_records"))]

            /// Arbitrary bytes as CSV and as JSON lines.
            #[test]
            fn arbitrary_bytes_never_panic(bytes in vec(any::<u8>(), 0..512)) {
                check(&Format::Csv(CsvFormat::default()), &bytes);
                check(&Format::Json(JsonFormat::default()), &bytes);
            }

            /// Valid records with bytes overwritten by characters that matter to the formats.
            #[test]
            fn mutated_records_never_panic(
                edits in vec((any::<prop::sample::Index>(), prop::sample::select(
                    b",\"\\{}[]:\n0-9.eE+tfnul \xff".to_vec())), 1..10),
                json in any::<bool>(),
            ) {
                let format = match json {
                    true => Format::Json(JsonFormat::default()),
                    false => Format::Csv(CsvFormat::default()),
                };
                let mut bytes = valid(&format);
                while bytes.last() == Some(&b'\n') {
                    bytes.pop();
                }
                for (at, value) in edits {
                    let i = at.index(bytes.len());
                    bytes[i] = value;
                }
                check(&format, &bytes);
            }
        }
    }
}
