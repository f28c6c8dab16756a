//! The metadata a Kafka table reads, with Flink's keys: each record's `topic`,
//! `partition`, `offset`, `timestamp` and `timestamp-type`, and, under `value.`, what its
//! format's messages state (`value.source.table` of `debezium-json`, ...). `headers` (a
//! MAP) and `leader-epoch` (which librdkafka's Rust binding does not expose) are refused by
//! name.

use std::sync::Arc;

use arrow::array::{ArrayRef, Int32Array, Int64Array, StringArray, UInt32Array};
use arrow::compute::take;
use arrow::datatypes::{DataType, SchemaRef};
use eddy_common::chunk::Chunk;
use rdkafka::Timestamp;

use crate::format::{Decoded, Fact, Format};
use crate::metadata::{ReadableMetadata, append_columns, repeated_text, timestamp_ltz, utc_millis};

/// The prefix of the format's metadata keys.
const VALUE: &str = "value.";

/// Every key a table in `format` can name.
pub(super) fn readable(format: &Format) -> Vec<ReadableMetadata> {
    let mut keys = vec![
        ReadableMetadata::new("topic", DataType::Utf8),
        ReadableMetadata::new("partition", DataType::Int32),
        ReadableMetadata::of_unsupported_type("headers", "MAP<STRING, BYTES>"),
        ReadableMetadata::refused(
            "leader-epoch",
            "unsupported: metadata 'leader-epoch' (librdkafka's Rust binding does not give a \
             record's leader epoch)"
                .into(),
        ),
        ReadableMetadata::new("offset", DataType::Int64),
        ReadableMetadata::new("timestamp", timestamp_ltz()),
        ReadableMetadata::new("timestamp-type", DataType::Utf8),
    ];
    for key in format.metadata_keys() {
        let name = format!("{VALUE}{}", key.key);
        keys.push(match key.reads {
            Ok(fact) => ReadableMetadata::new(name, fact.data_type()),
            Err(sql_type) => ReadableMetadata::of_unsupported_type(name, sql_type),
        });
    }
    keys
}

/// A record's own metadata, gathered for a batch, one entry a record (a line).
#[derive(Debug, Default)]
pub(super) struct RecordFacts {
    offsets: Vec<i64>,
    timestamps: Vec<i64>,
    kinds: Vec<&'static str>,
}

impl RecordFacts {
    /// Adds a record's.
    pub fn push(&mut self, offset: i64, timestamp: Timestamp) {
        let (millis, kind) = match timestamp {
            // As Kafka's Java client reports a record without one.
            Timestamp::NotAvailable => (-1, "NoTimestampType"),
            Timestamp::CreateTime(millis) => (millis, "CreateTime"),
            Timestamp::LogAppendTime(millis) => (millis, "LogAppendTime"),
        };
        self.offsets.push(offset);
        self.timestamps.push(millis);
        self.kinds.push(kind);
    }
}

/// One metadata column.
#[derive(Debug, Clone, Copy)]
enum Column {
    Topic,
    Partition,
    Offset,
    Timestamp,
    TimestampType,
    /// The format's fact at this index of [`MetadataColumns::facts`].
    Fact(usize),
}

/// The metadata columns a table reads, resolved from its keys once.
#[derive(Debug, Clone, Default)]
pub(super) struct MetadataColumns {
    columns: Vec<Column>,
    facts: Vec<Fact>,
}

impl MetadataColumns {
    /// The columns of `keys` (checked by the planner against [`readable`]).
    pub fn new(keys: &[String], format: &Format) -> Result<Self, String> {
        let mut resolved = MetadataColumns::default();
        for key in keys {
            let column = match key.as_str() {
                "topic" => Column::Topic,
                "partition" => Column::Partition,
                "offset" => Column::Offset,
                "timestamp" => Column::Timestamp,
                "timestamp-type" => Column::TimestampType,
                other => {
                    let fact = other
                        .strip_prefix(VALUE)
                        .and_then(|k| format.metadata_keys().iter().find(|m| m.key == k))
                        .and_then(|m| m.reads.ok())
                        .ok_or_else(|| format!("no readable metadata '{other}'"))?;
                    let index = match resolved.facts.iter().position(|f| *f == fact) {
                        Some(index) => index,
                        None => {
                            resolved.facts.push(fact);
                            resolved.facts.len() - 1
                        }
                    };
                    Column::Fact(index)
                }
            };
            resolved.columns.push(column);
        }
        Ok(resolved)
    }

    /// Whether the table reads no metadata.
    pub fn is_empty(&self) -> bool {
        self.columns.is_empty()
    }

    /// The format facts the columns need.
    pub fn facts(&self) -> &[Fact] {
        &self.facts
    }

    /// The decoded rows with the metadata columns appended, as `schema` has them; `records`
    /// holds the metadata of each line of the block decoded.
    pub fn append(
        &self,
        decoded: Decoded,
        schema: &SchemaRef,
        topic: &str,
        partition: i32,
        records: &RecordFacts,
    ) -> Result<Chunk, arrow::error::ArrowError> {
        let rows = decoded.chunk.num_rows();
        let lines = UInt32Array::from(decoded.line_of_row);
        let per_row = |per_record: ArrayRef| take(&per_record, &lines, None);
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(self.columns.len());
        for column in &self.columns {
            columns.push(match column {
                Column::Topic => repeated_text(topic, rows),
                Column::Partition => Arc::new(Int32Array::from(vec![partition; rows])),
                Column::Offset => per_row(Arc::new(Int64Array::from(records.offsets.clone())))?,
                Column::Timestamp => per_row(utc_millis(records.timestamps.clone()))?,
                Column::TimestampType => {
                    per_row(Arc::new(StringArray::from(records.kinds.clone())))?
                }
                Column::Fact(index) => per_row(decoded.facts[*index].clone())?,
            });
        }
        append_columns(decoded.chunk, schema, columns)
    }
}

#[cfg(test)]
mod tests {
    use arrow::datatypes::{Field, Schema};
    use eddy_common::metrics::OperatorMetrics;

    use super::*;
    use crate::format::{DebeziumJson, LinePosition};

    #[test]
    fn each_row_takes_its_records_metadata_and_its_messages_facts() {
        let format = Format::Debezium(DebeziumJson::default());
        let keys: Vec<String> = ["offset", "value.source.table", "topic", "timestamp-type"]
            .map(String::from)
            .to_vec();
        let columns = MetadataColumns::new(&keys, &format).unwrap();
        let physical = Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, true)]));
        let lines = concat!(
            r#"{"before":null,"after":{"id":1},"op":"c","source":{"table":"a"}}"#,
            "\n\n",
            r#"{"before":{"id":1},"after":{"id":2},"op":"u","source":{"table":"b"}}"#,
        );
        let at = LinePosition {
            file: "topic",
            first_line: 10,
        };
        let metrics = OperatorMetrics::default();
        let decoded = format
            .decode_traced(
                &physical,
                lines.as_bytes(),
                at,
                false,
                &metrics,
                Some(columns.facts()),
            )
            .unwrap()
            .unwrap();
        let mut records = RecordFacts::default();
        records.push(10, Timestamp::CreateTime(5));
        records.push(11, Timestamp::NotAvailable);
        records.push(12, Timestamp::LogAppendTime(7));
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, true),
            Field::new("offset", DataType::Int64, true),
            Field::new("tbl", DataType::Utf8, true),
            Field::new("topic", DataType::Utf8, true),
            Field::new("kind", DataType::Utf8, true),
        ]));
        let chunk = columns
            .append(decoded, &schema, "changes", 3, &records)
            .unwrap();
        assert_eq!(
            chunk.to_pretty(),
            [
                "+I 1 10 a changes CreateTime",
                "-U 1 12 b changes LogAppendTime",
                "+U 2 12 b changes LogAppendTime",
            ]
        );
    }
}
