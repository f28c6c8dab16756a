//! Record formats of the filesystem and Kafka connectors: CSV ([`csv`]) and JSON, one
//! object a line ([`json`]), the changelog formats of change-data-capture tools
//! ([`changelog`]: `debezium-json`, `canal-json`, `maxwell-json`), and Avro and Protobuf
//! records of Kafka messages ([`avro`]: `avro`, `avro-confluent`; [`protobuf`]), with
//! Flink's options and semantics, so that files and topics pass between the two engines.

pub mod avro;
pub mod changelog;
mod csv;
mod json;
mod messages;
pub mod protobuf;

use arrow::array::{ArrayRef, UInt8Array, new_null_array};
use arrow::compute::{concat, concat_batches};
use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use eddy_common::chunk::Chunk;
use eddy_common::metrics::OperatorMetrics;
use eddy_common::{EddyError, Result};

use self::avro::AvroFormat;
pub use self::changelog::canal::CanalJson;
pub use self::changelog::debezium::DebeziumJson;
pub use self::changelog::facts::{Fact, FactKey};
pub use self::changelog::maxwell::MaxwellJson;
pub use self::csv::CsvFormat;
pub use self::json::JsonFormat;
pub use self::messages::{MessageReader, MessageWriter, Messages};
use self::protobuf::ProtobufFormat;
use super::Options;

/// A record format.
#[derive(Debug, Clone)]
pub enum Format {
    /// Comma-separated values (no header line).
    Csv(CsvFormat),
    /// One JSON object a line.
    Json(JsonFormat),
    /// Debezium's change events (`debezium-json`).
    Debezium(DebeziumJson),
    /// Canal's change messages (`canal-json`).
    Canal(CanalJson),
    /// Maxwell's change messages (`maxwell-json`).
    Maxwell(MaxwellJson),
    /// Avro records (`avro`, `avro-confluent`), one a message: they frame themselves, so
    /// they are kept as [`Messages`], never as lines.
    Avro(AvroFormat),
    /// Protobuf records (`protobuf`), one a message.
    Protobuf(ProtobufFormat),
}

/// The names of the record formats (`'format' = '...'`).
pub const FORMAT_NAMES: &[&str] = &[
    "csv",
    "json",
    "debezium-json",
    "canal-json",
    "maxwell-json",
    "avro",
    "avro-confluent",
    "debezium-avro-confluent",
    "protobuf",
];

/// The option keys formats understand.
pub fn format_keys() -> Vec<&'static str> {
    let mut keys = vec!["format", "format.ignore-parse-errors"];
    keys.extend_from_slice(csv::CSV_KEYS);
    keys.extend_from_slice(json::JSON_KEYS);
    keys.extend_from_slice(changelog::debezium::KEYS);
    keys.extend_from_slice(changelog::canal::KEYS);
    keys.extend_from_slice(changelog::maxwell::KEYS);
    keys.extend_from_slice(avro::KEYS);
    keys.extend_from_slice(protobuf::KEYS);
    keys
}

impl Format {
    /// Reads `format` and its options; returns the format and whether malformed records are
    /// skipped rather than failing the job.
    pub fn from_options(options: &Options<'_>) -> Result<(Format, bool)> {
        let format = match options.required("format")? {
            "csv" => Format::Csv(CsvFormat::from_options(options)?),
            "json" => Format::Json(JsonFormat::from_options(options)?),
            "debezium-json" => Format::Debezium(DebeziumJson::from_options(options)?),
            "canal-json" => Format::Canal(CanalJson::from_options(options)?),
            "maxwell-json" => Format::Maxwell(MaxwellJson::from_options(options)?),
            "avro" => Format::Avro(AvroFormat::plain(options)?),
            "avro-confluent" => Format::Avro(AvroFormat::confluent(options)?),
            "debezium-avro-confluent" => Format::Avro(AvroFormat::debezium(options)?),
            "protobuf" => Format::Protobuf(ProtobufFormat::from_options(options)?),
            other => {
                return Err(options.error(format!(
                    "option 'format' = '{other}': expected one of {}",
                    FORMAT_NAMES.join(", ")
                )));
            }
        };
        let own_key = format!("{}.ignore-parse-errors", format.name());
        let ignore =
            options.flag("format.ignore-parse-errors", false)? || options.flag(&own_key, false)?;
        Ok((format, ignore))
    }

    /// The format's name (`'format' = '...'`).
    pub fn name(&self) -> &'static str {
        match self {
            Format::Csv(_) => "csv",
            Format::Json(_) => "json",
            Format::Debezium(_) => "debezium-json",
            Format::Canal(_) => "canal-json",
            Format::Maxwell(_) => "maxwell-json",
            Format::Avro(avro) => avro.name(),
            Format::Protobuf(_) => "protobuf",
        }
    }

    /// Whether records carry changes (`-U`, `+U`, `-D`), not only inserts: a table in
    /// such a format is an updating source. Its records must be read in order, so a file
    /// is never cut into splits read apart.
    pub fn is_changelog(&self) -> bool {
        match self {
            Format::Debezium(_) | Format::Canal(_) | Format::Maxwell(_) => true,
            Format::Avro(avro) => avro.is_changelog(),
            _ => false,
        }
    }

    /// Why a table in this format cannot be written, if it cannot.
    pub fn write_refusal(&self) -> Option<String> {
        self.is_changelog().then(|| {
            format!(
                "unsupported: writing the '{}' format (Eddy reads change streams in it; write \
                 changes to a 'postgres' or 'print' table, or to 'json' with inserts only)",
                self.name()
            )
        })
    }

    /// The metadata the format's messages state (Flink's format metadata keys), empty for a
    /// format without any.
    pub fn metadata_keys(&self) -> &'static [FactKey] {
        match self {
            Format::Csv(_) | Format::Json(_) | Format::Avro(_) | Format::Protobuf(_) => &[],
            Format::Debezium(_) => changelog::facts::DEBEZIUM,
            Format::Canal(_) => changelog::facts::CANAL,
            Format::Maxwell(_) => changelog::facts::MAXWELL,
        }
    }

    /// The file name extension.
    pub fn extension(&self) -> &'static str {
        match self {
            Format::Csv(_) => "csv",
            Format::Avro(_) => "avro",
            Format::Protobuf(_) => "pb",
            _ => "json",
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
    ) -> Result<Option<Chunk>> {
        let decoded = self.decode_traced(schema, lines, location, ignore_errors, metrics, None)?;
        Ok(decoded.map(|d| d.chunk))
    }

    /// Decodes complete lines as [`Format::decode`] does; with `trace`, keeps the line
    /// each row came from and these facts of each line (for metadata columns).
    pub fn decode_traced(
        &self,
        schema: &SchemaRef,
        lines: &[u8],
        location: LinePosition<'_>,
        ignore_errors: bool,
        metrics: &OperatorMetrics,
        trace: Option<&[Fact]>,
    ) -> Result<Option<Decoded>> {
        if let Ok(decoded) = self.decode_strict_traced(schema, lines, trace) {
            return Ok(decoded);
        }
        // Find the bad records one line at a time.
        let mut good = Vec::new();
        for (i, line) in lines.split(|b| *b == b'\n').enumerate() {
            if line.iter().all(u8::is_ascii_whitespace) {
                good.push(None);
                continue;
            }
            match self.decode_strict_traced(schema, line, trace) {
                Ok(decoded) => good.push(decoded),
                Err(e) if ignore_errors => {
                    tracing::debug!(file = location.file, line = location.first_line + i as u64, error = %e, "skipping malformed record");
                    OperatorMetrics::add(&metrics.parse_errors_skipped, 1);
                    good.push(None);
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
        Decoded::concat_lines(schema, good, trace)
    }

    /// Decodes complete lines, failing on the first malformed record (without saying
    /// where).
    pub(crate) fn decode_strict(
        &self,
        schema: &SchemaRef,
        bytes: &[u8],
    ) -> Result<Option<Chunk>, arrow::error::ArrowError> {
        let decoded = self.decode_strict_traced(schema, bytes, None)?;
        Ok(decoded.map(|d| d.chunk))
    }

    fn decode_strict_traced(
        &self,
        schema: &SchemaRef,
        bytes: &[u8],
        trace: Option<&[Fact]>,
    ) -> Result<Option<Decoded>, arrow::error::ArrowError> {
        let rows = bytes.iter().filter(|b| **b == b'\n').count() + 1;
        let inserts = |batch: Option<RecordBatch>| match batch {
            Some(batch) => Decoded::one_row_a_line(Chunk::inserts(batch), bytes, trace).map(Some),
            None => Ok(None),
        };
        match self {
            Format::Csv(csv) => inserts(csv.decode(schema, bytes, rows)?),
            Format::Json(json) => inserts(json.decode(schema, bytes, rows)?),
            Format::Debezium(debezium) => changelog::decode_changes(debezium, schema, bytes, trace),
            Format::Canal(canal) => changelog::decode_changes(canal, schema, bytes, trace),
            Format::Maxwell(maxwell) => changelog::decode_changes(maxwell, schema, bytes, trace),
            Format::Avro(_) | Format::Protobuf(_) => {
                Err(arrow::error::ArrowError::InvalidArgumentError(format!(
                    "'{}' records are not lines",
                    self.name()
                )))
            }
        }
    }

    /// Appends the rows, encoded, to `out`.
    pub fn encode(&self, batch: &RecordBatch, out: &mut Vec<u8>) -> Result<()> {
        match self {
            Format::Csv(csv) => csv.encode(batch, out),
            Format::Json(json) => json.encode(batch, out),
            Format::Avro(_) | Format::Protobuf(_) => Err(EddyError::Internal(format!(
                "'{}' records are not lines (they are written as messages)",
                self.name()
            ))),
            changelog => Err(EddyError::Internal(format!(
                "the '{}' format cannot be written (the planner refuses it as a sink)",
                changelog.name()
            ))),
        }
    }
}

/// Decoded rows with what metadata columns need: the line each row came from, and the
/// format metadata of each line (empty both when not asked for).
#[derive(Debug)]
pub struct Decoded {
    /// The rows.
    pub chunk: Chunk,
    /// The line (from 0) of each row.
    pub line_of_row: Vec<u32>,
    /// One column per fact asked for, one value per line.
    pub facts: Vec<ArrayRef>,
}

impl Decoded {
    /// Rows of a format that makes one row of each line that is not blank.
    fn one_row_a_line(
        chunk: Chunk,
        bytes: &[u8],
        trace: Option<&[Fact]>,
    ) -> Result<Decoded, arrow::error::ArrowError> {
        let Some(facts) = trace else {
            return Ok(Decoded {
                chunk,
                line_of_row: Vec::new(),
                facts: Vec::new(),
            });
        };
        let lines: Vec<&[u8]> = bytes.split(|b| *b == b'\n').collect();
        let line_of_row: Vec<u32> = (0..lines.len() as u32)
            .filter(|i| !lines[*i as usize].iter().all(u8::is_ascii_whitespace))
            .collect();
        if line_of_row.len() != chunk.num_rows() {
            return Err(arrow::error::ArrowError::JsonError(format!(
                "{} records decoded into {} rows",
                line_of_row.len(),
                chunk.num_rows()
            )));
        }
        let facts = facts
            .iter()
            .map(|fact| new_null_array(&fact.data_type(), lines.len()))
            .collect();
        Ok(Decoded {
            chunk,
            line_of_row,
            facts,
        })
    }

    /// The rows decoded line by line (`None`: a line without rows) as one, their lines
    /// counted across the block.
    fn concat_lines(
        schema: &SchemaRef,
        lines: Vec<Option<Decoded>>,
        trace: Option<&[Fact]>,
    ) -> Result<Option<Decoded>> {
        let mut facts: Vec<Vec<ArrayRef>> = vec![Vec::new(); trace.map_or(0, <[Fact]>::len)];
        let mut line_of_row = Vec::new();
        let mut chunks = Vec::new();
        for (line, decoded) in lines.into_iter().enumerate() {
            for (k, fact) in trace.unwrap_or_default().iter().enumerate() {
                facts[k].push(match &decoded {
                    Some(decoded) => decoded.facts[k].clone(),
                    None => new_null_array(&fact.data_type(), 1),
                });
            }
            if let Some(decoded) = decoded {
                if trace.is_some() {
                    line_of_row.extend(std::iter::repeat_n(line as u32, decoded.chunk.num_rows()));
                }
                chunks.push(decoded.chunk);
            }
        }
        let Some(chunk) = concat_chunks(schema, &chunks)? else {
            return Ok(None);
        };
        let facts = facts
            .iter()
            .map(|parts| {
                let parts: Vec<&dyn arrow::array::Array> =
                    parts.iter().map(|a| a.as_ref()).collect();
                concat(&parts)
            })
            .collect::<Result<Vec<ArrayRef>, _>>()?;
        Ok(Some(Decoded {
            chunk,
            line_of_row,
            facts,
        }))
    }
}

/// The chunks as one, ops kept; `None` when there are none.
pub(crate) fn concat_chunks(schema: &SchemaRef, chunks: &[Chunk]) -> Result<Option<Chunk>> {
    match chunks {
        [] => Ok(None),
        [one] => Ok(Some(one.clone())),
        _ => {
            let batches: Vec<&RecordBatch> = chunks.iter().map(Chunk::rows).collect();
            let rows = concat_batches(schema, batches)?;
            if chunks.iter().all(Chunk::is_append_only) {
                return Ok(Some(Chunk::inserts(rows)));
            }
            let ops = chunks
                .iter()
                .flat_map(|c| (0..c.num_rows()).map(move |i| c.op(i) as u8));
            Ok(Some(Chunk::with_ops(
                rows,
                UInt8Array::from_iter_values(ops),
            )))
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
        assert_eq!(read.rows(), &batch);
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

        /// The changelog formats, with valid messages of [`schema`]'s rows in each (every
        /// kind of change), to mutate.
        fn valid_changes() -> Vec<(Format, Vec<u8>)> {
            let json = valid(&Format::Json(JsonFormat::default()));
            let rows: Vec<&str> = std::str::from_utf8(&json).unwrap().lines().collect();
            let mut debezium = String::new();
            let mut canal = String::new();
            let mut maxwell = String::new();
            for (i, row) in rows.iter().enumerate() {
                let old = rows[(i + 1) % rows.len()];
                debezium += &format!(
                    "{{\"before\":null,\"after\":{row},\"op\":\"c\",\"ts_ms\":5,\"source\":{{\"db\":\"d\",\"ts_ms\":\"6\"}}}}\n\
                     {{\"before\":{row},\"after\":{old},\"op\":\"u\"}}\n\
                     {{\"before\":{old},\"after\":null,\"op\":\"d\"}}\n"
                );
                canal += &format!(
                    "{{\"data\":[{row},{old}],\"type\":\"INSERT\",\"ts\":1,\"es\":2,\"database\":\"d\"}}\n\
                     {{\"data\":[{row}],\"old\":[{old}],\"type\":\"UPDATE\"}}\n\
                     {{\"data\":[{old}],\"type\":\"DELETE\",\"table\":\"t\"}}\n"
                );
                maxwell += &format!(
                    "{{\"data\":{row},\"type\":\"insert\",\"ts\":3,\"table\":\"t\"}}\n\
                     {{\"data\":{row},\"old\":{old},\"type\":\"update\"}}\n\
                     {{\"data\":{old},\"type\":\"delete\"}}\n"
                );
            }
            vec![
                (
                    Format::Debezium(DebeziumJson::default()),
                    debezium.into_bytes(),
                ),
                (Format::Canal(CanalJson::default()), canal.into_bytes()),
                (Format::Maxwell(MaxwellJson), maxwell.into_bytes()),
            ]
        }

        #[test]
        fn valid_changes_decode_whole() {
            for (format, bytes) in valid_changes() {
                let at = LinePosition {
                    file: "changes.json",
                    first_line: 1,
                };
                let metrics = OperatorMetrics::default();
                let chunk = format
                    .decode(&schema(), &bytes, at, false, &metrics)
                    .unwrap()
                    .unwrap();
                let expected = match format {
                    Format::Canal(_) => 15,
                    _ => 12,
                };
                assert_eq!(chunk.num_rows(), expected, "{}", format.name());
            }
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
            // Traced, each row names a line of the input and each fact has a value a line.
            let facts: Vec<Fact> = format
                .metadata_keys()
                .iter()
                .filter_map(|k| k.reads.ok())
                .collect();
            let traced = format.decode_traced(&schema(), lines, at, true, &metrics, Some(&facts));
            if let Ok(Some(decoded)) = traced {
                assert_eq!(decoded.line_of_row.len(), decoded.chunk.num_rows());
                assert!(
                    decoded
                        .line_of_row
                        .iter()
                        .all(|l| u64::from(*l) < line_count)
                );
                for column in &decoded.facts {
                    assert_eq!(column.len() as u64, line_count);
                }
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

            /// Valid change messages with bytes overwritten by characters that matter to
            /// JSON, in each changelog format.
            #[test]
            fn mutated_change_messages_never_panic(
                edits in vec((any::<prop::sample::Index>(), prop::sample::select(
                    b",\"\\{}[]:\n0-9.eE+tfnul cudr\xff".to_vec())), 1..10),
                which in 0..3usize,
            ) {
                let (format, mut bytes) = valid_changes().swap_remove(which);
                for (at, value) in edits {
                    let i = at.index(bytes.len());
                    bytes[i] = value;
                }
                check(&format, &bytes);
                check(&format, &bytes[..bytes.len() / 2]);
            }
        }
    }
}
