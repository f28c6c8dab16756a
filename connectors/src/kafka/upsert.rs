//! `'connector' = 'upsert-kafka'`: a topic as a table with a `PRIMARY KEY`, as Flink's
//! upsert-kafka connector keeps one. Each record's key holds the primary key's columns
//! (`key.format`); its value holds the row (`value.format`, with `value.fields-include` =
//! `ALL` every column, with `EXCEPT_KEY` the others) or nothing: a tombstone, the key's
//! delete. Key columns may carry `key.fields-prefix` in the table and not in the key.
//!
//! Read, a record is the key's new row (`+U`) or its delete (`-D` carrying the key alone);
//! the planner follows the source with a changelog normalization keyed by the primary key,
//! which keeps each key's last row and turns these into `+I`/`-U`/`+U`/`-D` (Flink's
//! `ChangelogNormalize`). Written, `+I` and `+U` rows become records keyed by their primary
//! key, `-D` rows tombstones, and `-U` rows nothing when their key's `+U` follows (else a
//! tombstone: the row left); with `sink.buffer-flush.max-rows` and
//! `sink.buffer-flush.interval` a sink keeps only each key's last record until it flushes.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use arrow::array::{Array, ArrayRef, new_null_array};
use arrow::datatypes::{Schema, SchemaRef};
use arrow::error::ArrowError;
use arrow::record_batch::RecordBatch;
use eddy_common::chunk::{Chunk, Op};
use eddy_common::metrics::OperatorMetrics;
use eddy_common::{EddyError, Result};
use hashbrown::HashMap;

use crate::Options;
use crate::format::{
    Decoded, Format, LinePosition, MessageReader, MessageWriter, Messages, format_keys,
};

/// The option keys of upsert-kafka besides the Kafka connector's and the formats'.
pub(super) const KEYS: &[&str] = &[
    "key.format",
    "value.format",
    "key.fields-prefix",
    "value.fields-include",
    "sink.buffer-flush.max-rows",
    "sink.buffer-flush.interval",
];

/// How rows map to records' keys and values.
#[derive(Debug, Clone)]
pub struct UpsertLayout {
    key_format: Format,
    value_format: Format,
    /// The table's columns in the key, in key order, and the key's own schema (names
    /// without `key.fields-prefix`).
    key_columns: Vec<usize>,
    key_schema: SchemaRef,
    /// The table's columns in the value, and the value's schema.
    value_columns: Vec<usize>,
    value_schema: SchemaRef,
    /// The table's columns.
    schema: SchemaRef,
    table: String,
    /// Skip (and count) records whose key or value is malformed.
    pub(super) ignore_parse_errors: bool,
    /// Keep only each key's last record, flushing after this many keys or this long.
    pub(super) buffer_flush: Option<(usize, Duration)>,
}

impl UpsertLayout {
    /// The layout the options describe, for a table of `schema` keyed by `primary_key`.
    pub(super) fn from_options(
        options: &Options<'_>,
        values: &BTreeMap<String, String>,
        schema: &SchemaRef,
        primary_key: &[String],
    ) -> Result<Self> {
        if primary_key.is_empty() {
            return Err(options.error(
                "an 'upsert-kafka' table needs a PRIMARY KEY (... NOT ENFORCED): its columns \
                 are the records' key"
                    .into(),
            ));
        }
        let prefix = options.get("key.fields-prefix").unwrap_or("");
        let except_key = match options.get("value.fields-include").unwrap_or("ALL") {
            v if v.eq_ignore_ascii_case("ALL") => false,
            v if v.eq_ignore_ascii_case("EXCEPT_KEY") => true,
            other => {
                return Err(options.error(format!(
                    "option 'value.fields-include' = '{other}': expected ALL or EXCEPT_KEY"
                )));
            }
        };
        if !prefix.is_empty() && !except_key {
            return Err(options.error(
                "option 'key.fields-prefix' needs 'value.fields-include' = 'EXCEPT_KEY' (as in \
                 Flink)"
                    .into(),
            ));
        }
        let key_columns = primary_key
            .iter()
            .map(|k| {
                schema
                    .index_of(k)
                    .map_err(|_| options.error(format!("no column '{k}'")))
            })
            .collect::<Result<Vec<_>>>()?;
        let key_fields = key_columns
            .iter()
            .map(|i| {
                let field = schema.field(*i);
                let name = field.name().strip_prefix(prefix).ok_or_else(|| {
                    options.error(format!(
                        "key column '{}' does not start with 'key.fields-prefix' = '{prefix}'",
                        field.name()
                    ))
                })?;
                Ok(field.as_ref().clone().with_name(name))
            })
            .collect::<Result<Vec<_>>>()?;
        let value_columns: Vec<usize> = (0..schema.fields().len())
            .filter(|i| !except_key || !key_columns.contains(i))
            .collect();
        let value_schema = Arc::new(Schema::new(
            value_columns
                .iter()
                .map(|i| schema.field(*i).clone())
                .collect::<Vec<_>>(),
        ));
        let (key_format, key_ignore) = side_format(options, values, "key")?;
        let (value_format, value_ignore) = side_format(options, values, "value")?;
        let max_rows: usize = options.parse_or("sink.buffer-flush.max-rows", 0)?;
        let interval = options.duration_opt("sink.buffer-flush.interval")?;
        let buffer_flush = match (max_rows, interval) {
            (0, None | Some(Duration::ZERO)) => None,
            (rows, Some(interval)) if rows > 0 && !interval.is_zero() => Some((rows, interval)),
            _ => {
                return Err(options.error(
                    "'sink.buffer-flush.max-rows' and 'sink.buffer-flush.interval' must both be \
                     set above zero to buffer, or neither (as in Flink)"
                        .into(),
                ));
            }
        };
        Ok(UpsertLayout {
            key_format,
            value_format,
            key_columns,
            key_schema: Arc::new(Schema::new(key_fields)),
            value_columns,
            value_schema,
            schema: schema.clone(),
            table: options.table().to_string(),
            ignore_parse_errors: key_ignore || value_ignore,
            buffer_flush,
        })
    }

    /// The primary key's columns.
    pub fn key_columns(&self) -> &[usize] {
        &self.key_columns
    }

    /// The table's rows of `records` (keys, and values for those that are not
    /// tombstones), as `+U` rows and `-D` rows carrying the key alone. A record whose key
    /// or value cannot be decoded fails with `describe(i)` naming it, or is skipped and
    /// counted in `skipped`. `traced` keeps each row's record (for metadata columns).
    pub(super) fn decode(
        &self,
        records: &KeyedRecords,
        readers: &mut SideReaders,
        describe: impl Fn(usize) -> String,
        skipped: &mut u64,
        traced: bool,
    ) -> Result<Option<Decoded>> {
        if let Ok(chunk) = self.decode_all(records, readers) {
            return Ok(chunk.map(|chunk| Decoded {
                line_of_row: match traced {
                    true => (0..chunk.num_rows() as u32).collect(),
                    false => Vec::new(),
                },
                chunk,
                facts: Vec::new(),
            }));
        }
        let mut good = Vec::new();
        let mut line_of_row = Vec::new();
        for (i, (key, value)) in records.iter().enumerate() {
            let mut one = KeyedRecords::default();
            one.push(key, value);
            match self.decode_all(&one, readers) {
                Ok(Some(chunk)) => {
                    if traced {
                        line_of_row.extend(std::iter::repeat_n(i as u32, chunk.num_rows()));
                    }
                    good.push(chunk);
                }
                Ok(None) => {}
                Err(_) if self.ignore_parse_errors => *skipped += 1,
                Err(e) => {
                    return Err(EddyError::Connector {
                        table: self.table.clone(),
                        message: format!("{}: {e}", describe(i)),
                    });
                }
            }
        }
        let chunk = crate::format::concat_chunks(&self.schema, &good)?;
        Ok(chunk.map(|chunk| Decoded {
            chunk,
            line_of_row,
            facts: Vec::new(),
        }))
    }

    fn decode_all(
        &self,
        records: &KeyedRecords,
        readers: &mut SideReaders,
    ) -> Result<Option<Chunk>, String> {
        let count = records.len();
        if count == 0 {
            return Ok(None);
        }
        let keys = decode_side(
            &self.key_format,
            readers.key.as_mut(),
            &self.key_schema,
            &records.keys,
            |prefix| records.key_messages(prefix),
        )?
        .filter(|keys| keys.num_rows() == count);
        let Some(keys) = keys else {
            return Err("a record without a key".into());
        };
        let present = records.tombstones.iter().filter(|t| !**t).count();
        let values = match present {
            0 => None,
            _ => decode_side(
                &self.value_format,
                readers.value.as_mut(),
                &self.value_schema,
                &records.values,
                |prefix| records.value_messages(prefix),
            )?,
        };
        if values.as_ref().map_or(0, RecordBatch::num_rows) != present {
            return Err("a record with an empty value".into());
        }
        let rows = self
            .assemble(&keys, values.as_ref(), &records.tombstones)
            .map_err(|e| e.to_string())?;
        let ops = records
            .tombstones
            .iter()
            .map(|t| if *t { Op::Delete } else { Op::UpdateAfter })
            .collect();
        Ok(Some(Chunk::from_ops(rows, ops)))
    }

    /// The table's rows from decoded keys and values: a value's columns from the value, a
    /// tombstone's key columns from the key and the others NULL.
    fn assemble(
        &self,
        keys: &RecordBatch,
        values: Option<&RecordBatch>,
        tombstones: &[bool],
    ) -> Result<RecordBatch, ArrowError> {
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(self.schema.fields().len());
        for (c, field) in self.schema.fields().iter().enumerate() {
            let null = new_null_array(field.data_type(), 1);
            let key = self.key_columns.iter().position(|k| *k == c);
            let value = self.value_columns.iter().position(|v| *v == c);
            let from_key = key.map_or(null.clone(), |k| keys.column(k).clone());
            let from_value = match (value, values) {
                (Some(v), Some(values)) => values.column(v).clone(),
                _ => null.clone(),
            };
            let mut next_value = 0;
            let indices: Vec<(usize, usize)> = tombstones
                .iter()
                .enumerate()
                .map(|(i, tombstone)| {
                    if *tombstone {
                        return if key.is_some() { (0, i) } else { (2, 0) };
                    }
                    next_value += 1;
                    match (value, key) {
                        (Some(_), _) => (1, next_value - 1),
                        (None, Some(_)) => (0, i),
                        (None, None) => (2, 0),
                    }
                })
                .collect();
            let sources: [&dyn Array; 3] = [from_key.as_ref(), from_value.as_ref(), null.as_ref()];
            columns.push(arrow::compute::interleave(&sources, &indices)?);
        }
        RecordBatch::try_new(self.schema.clone(), columns)
    }

    /// Appends the records a chunk of changes makes: `+I`/`+U` the row under its key,
    /// `-D` the key's tombstone, `-U` nothing when the key's `+U` follows it, else the
    /// key's tombstone (a filter after an aggregate drops the `+U` of a row that leaves).
    pub(super) async fn encode(
        &self,
        chunk: &Chunk,
        writers: &mut SideWriters,
        out: &mut KeyedRecords,
    ) -> Result<()> {
        let rows = chunk.rows();
        let keys = project(rows, &self.key_columns, &self.key_schema)?;
        let values = project(rows, &self.value_columns, &self.value_schema)?;
        let keys = encode_side(&self.key_format, writers.key.as_mut(), &keys).await?;
        let values = encode_side(&self.value_format, writers.value.as_mut(), &values).await?;
        let keys: Vec<&[u8]> = keys.iter().collect();
        let values: Vec<&[u8]> = values.iter().collect();
        if keys.len() != chunk.num_rows() || values.len() != chunk.num_rows() {
            return Err(EddyError::Internal(
                "an encoded row spans lines (a line break in a CSV field)".into(),
            ));
        }
        for i in 0..chunk.num_rows() {
            let (key, value) = (keys[i], values[i]);
            match chunk.op(i) {
                Op::Insert | Op::UpdateAfter => out.push(key, Some(value)),
                Op::Delete => out.push(key, None),
                Op::UpdateBefore => {
                    let replaced = i + 1 < chunk.num_rows()
                        && chunk.op(i + 1) == Op::UpdateAfter
                        && keys[i + 1] == key;
                    if !replaced {
                        out.push(key, None);
                    }
                }
            }
        }
        Ok(())
    }

    /// The readers of a source subtask (for framed key and value formats).
    pub(super) fn readers(&self, batch_size: usize) -> Result<SideReaders> {
        Ok(SideReaders {
            key: MessageReader::new(&self.key_format, &self.key_schema, batch_size).transpose()?,
            value: MessageReader::new(&self.value_format, &self.value_schema, batch_size)
                .transpose()?,
        })
    }

    /// The writers of a sink subtask (for framed key and value formats).
    pub(super) fn writers(&self) -> Result<SideWriters> {
        Ok(SideWriters {
            key: MessageWriter::new(&self.key_format, &self.table, &self.key_schema).transpose()?,
            value: MessageWriter::new(&self.value_format, &self.table, &self.value_schema)
                .transpose()?,
        })
    }
}

/// The readers of an upsert table's keys and values in a framed format (Avro, Protobuf),
/// one per source subtask; `None` for a line format.
#[derive(Default)]
pub struct SideReaders {
    key: Option<MessageReader>,
    value: Option<MessageReader>,
}

impl SideReaders {
    /// Fetches what decoding `records` needs (Avro writer schemas from a registry).
    pub async fn prepare(&mut self, records: &KeyedRecords) -> Result<()> {
        if let Some(key) = &mut self.key {
            let ids = key.unknown_ids(records.iter().map(|(key, _)| key));
            key.fetch(ids).await?;
        }
        if let Some(value) = &mut self.value {
            let ids = value.unknown_ids(records.iter().filter_map(|(_, value)| value));
            value.fetch(ids).await?;
        }
        Ok(())
    }
}

/// The writers of an upsert table's keys and values in a framed format, one per sink
/// subtask; `None` for a line format.
#[derive(Default)]
pub struct SideWriters {
    key: Option<MessageWriter>,
    value: Option<MessageWriter>,
}

/// Decodes one side (keys or values) of records: lines by the line format, or messages
/// (each behind the reader's record prefix) by the side's reader.
fn decode_side(
    format: &Format,
    reader: Option<&mut MessageReader>,
    schema: &SchemaRef,
    lines: &[u8],
    messages: impl FnOnce(&[u8]) -> Messages,
) -> Result<Option<RecordBatch>, String> {
    let chunk = match reader {
        None => format
            .decode_strict(schema, lines)
            .map_err(|e| e.to_string())?,
        Some(reader) => {
            let at = LinePosition {
                file: "the batch",
                first_line: 0,
            };
            let metrics = OperatorMetrics::default();
            let records = messages(reader.record_prefix());
            let decoded = reader.decode(&records, at, false, &metrics, false);
            decoded.map_err(|e| e.to_string())?.map(|d| d.chunk)
        }
    };
    Ok(chunk.map(|c| c.rows().clone()))
}

/// Encodes one side (keys or values) of rows, a record each.
async fn encode_side(
    format: &Format,
    writer: Option<&mut MessageWriter>,
    rows: &RecordBatch,
) -> Result<Messages> {
    let mut out = Messages::default();
    match writer {
        Some(writer) => writer.encode(rows, &mut out).await?,
        None => {
            let mut text = Vec::new();
            format.encode(rows, &mut text)?;
            if text.last() == Some(&b'\n') {
                text.pop();
            }
            if rows.num_rows() > 0 {
                text.split(|b| *b == b'\n').for_each(|line| out.push(line));
            }
        }
    }
    Ok(out)
}

/// The records of `bytes` that end at `ends`, each followed by a line break.
fn spans<'a>(bytes: &'a [u8], ends: &'a [usize]) -> impl Iterator<Item = &'a [u8]> + 'a {
    ends.iter().enumerate().map(move |(i, end)| {
        let start = i.checked_sub(1).map_or(0, |before| ends[before] + 1);
        &bytes[start..*end]
    })
}

/// `columns` of `rows`, renamed as `schema` says.
fn project(rows: &RecordBatch, columns: &[usize], schema: &SchemaRef) -> Result<RecordBatch> {
    let arrays = columns.iter().map(|c| rows.column(*c).clone()).collect();
    Ok(RecordBatch::try_new(schema.clone(), arrays)?)
}

/// The format of the key or the value (`side`): `<side>.format` and its options, given
/// as `<side>.<format>.<option>`.
fn side_format(
    options: &Options<'_>,
    values: &BTreeMap<String, String>,
    side: &str,
) -> Result<(Format, bool)> {
    let prefix = format!("{side}.");
    let own: BTreeMap<String, String> = values
        .iter()
        .filter(|(k, _)| *k != "key.fields-prefix" && *k != "value.fields-include")
        .filter_map(|(k, v)| Some((k.strip_prefix(&prefix)?.to_string(), v.clone())))
        .collect();
    if !own.contains_key("format") {
        return Err(options.error(format!(
            "the 'upsert-kafka' connector needs option '{side}.format'"
        )));
    }
    let what = format!("upsert-kafka ({side} format, options '{prefix}*')");
    let own = Options::validate(options.table(), &what, &own, &format_keys(), &[])?;
    let (format, ignore) = Format::from_options(&own)?;
    // Flink's Kafka tables name a key's and a value's subject after the topic.
    let format = match (format, options.get("topic")) {
        (Format::Avro(avro), Some(topic)) => {
            Format::Avro(avro.with_default_subject(format!("{topic}-{side}")))
        }
        (format, _) => format,
    };
    if format.is_changelog() {
        return Err(options.error(format!(
            "option '{side}.format' = '{}': an upsert-kafka record's {side} is a row, not a \
             change (use json or csv)",
            format.name()
        )));
    }
    Ok((format, ignore))
}

/// Kafka records with keys: keys and values each followed by a line break (so that a
/// line format decodes them as they are), where each ends kept (so that any bytes may be
/// in them), tombstones (no value) marked.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct KeyedRecords {
    keys: Vec<u8>,
    key_ends: Vec<usize>,
    values: Vec<u8>,
    value_ends: Vec<usize>,
    tombstones: Vec<bool>,
}

impl KeyedRecords {
    /// Adds a record: its key and its value (`None`: a tombstone).
    pub fn push(&mut self, key: &[u8], value: Option<&[u8]>) {
        self.keys.extend_from_slice(key);
        self.key_ends.push(self.keys.len());
        self.keys.push(b'\n');
        if let Some(value) = value {
            self.values.extend_from_slice(value);
            self.value_ends.push(self.values.len());
            self.values.push(b'\n');
        }
        self.tombstones.push(value.is_none());
    }

    /// How many records.
    pub fn len(&self) -> usize {
        self.tombstones.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.tombstones.is_empty()
    }

    /// Forgets every record.
    pub fn clear(&mut self) {
        self.keys.clear();
        self.key_ends.clear();
        self.values.clear();
        self.value_ends.clear();
        self.tombstones.clear();
    }

    /// The records, in order: key and value (`None`: a tombstone).
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], Option<&[u8]>)> {
        let mut values = spans(&self.values, &self.value_ends);
        spans(&self.keys, &self.key_ends)
            .zip(&self.tombstones)
            .map(move |(key, tombstone)| match tombstone {
                true => (key, None),
                false => (key, Some(values.next().unwrap_or_default())),
            })
    }

    /// The keys, each a message (behind `prefix`).
    pub fn key_messages(&self, prefix: &[u8]) -> Messages {
        let mut out = Messages::default();
        spans(&self.keys, &self.key_ends).for_each(|key| out.push_prefixed(prefix, key));
        out
    }

    /// The values of the records that are not tombstones, each a message (behind
    /// `prefix`).
    pub fn value_messages(&self, prefix: &[u8]) -> Messages {
        let mut out = Messages::default();
        spans(&self.values, &self.value_ends).for_each(|value| out.push_prefixed(prefix, value));
        out
    }

    /// Only each key's last record, in the order of those last records.
    pub fn reduced(&self) -> KeyedRecords {
        let records: Vec<(&[u8], Option<&[u8]>)> = self.iter().collect();
        let mut last: HashMap<&[u8], usize> = HashMap::with_capacity(records.len());
        for (i, (key, _)) in records.iter().enumerate() {
            last.insert(key, i);
        }
        let mut out = KeyedRecords::default();
        for (i, (key, value)) in records.iter().enumerate() {
            if last.get(key) == Some(&i) {
                out.push(key, *value);
            }
        }
        out
    }

    /// Writes the records into a snapshot.
    pub fn save(&self, out: &mut eddy_common::state::StateWriter) {
        out.u64(self.len() as u64);
        for (key, value) in self.iter() {
            out.bytes(key)
                .u64(value.is_some() as u64)
                .bytes(value.unwrap_or_default());
        }
    }

    /// Reads records written by [`KeyedRecords::save`].
    pub fn load(input: &mut eddy_common::state::StateReader<'_>) -> Result<KeyedRecords> {
        let mut out = KeyedRecords::default();
        for _ in 0..input.count(3)? {
            let key = input.bytes()?;
            let present = input.u64()? == 1;
            let value = input.bytes()?;
            out.push(key, present.then_some(value));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use arrow::array::{Int64Array, StringArray};
    use arrow::datatypes::{DataType, Field};

    use futures::executor::block_on;

    use super::*;

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("k_id", DataType::Int64, false),
            Field::new("name", DataType::Utf8, true),
        ]))
    }

    fn layout(extra: &[(&str, &str)]) -> Result<UpsertLayout> {
        let mut values: BTreeMap<String, String> =
            [("key.format", "json"), ("value.format", "json")]
                .iter()
                .chain(extra)
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
        values.insert("connector".into(), "upsert-kafka".into());
        let mut keys = KEYS.to_vec();
        keys.extend(format_keys());
        let options = Options::validate("t", "upsert-kafka", &values, &keys, &["key.", "value."])?;
        UpsertLayout::from_options(&options, &values, &schema(), &["k_id".to_string()])
    }

    #[test]
    fn records_round_trip_with_a_key_prefix_and_tombstones() {
        let layout = layout(&[
            ("key.fields-prefix", "k_"),
            ("value.fields-include", "EXCEPT_KEY"),
        ])
        .unwrap();
        let rows = RecordBatch::try_new(
            schema(),
            vec![
                Arc::new(Int64Array::from(vec![1, 2, 1, 2])),
                Arc::new(StringArray::from(vec![
                    Some("a"),
                    Some("b"),
                    Some("a"),
                    None,
                ])),
            ],
        )
        .unwrap();
        let chunk = Chunk::from_ops(
            rows,
            vec![Op::Insert, Op::UpdateAfter, Op::UpdateBefore, Op::Delete],
        );
        let mut records = KeyedRecords::default();
        block_on(layout.encode(&chunk, &mut SideWriters::default(), &mut records)).unwrap();
        let written: Vec<(String, Option<String>)> = records
            .iter()
            .map(|(k, v)| {
                let text = |b: &[u8]| String::from_utf8(b.to_vec()).unwrap();
                (text(k), v.map(text))
            })
            .collect();
        assert_eq!(
            written,
            [
                (
                    "{\"id\":1}".to_string(),
                    Some("{\"name\":\"a\"}".to_string())
                ),
                (
                    "{\"id\":2}".to_string(),
                    Some("{\"name\":\"b\"}".to_string())
                ),
                // A `-U` whose `+U` does not follow: the row left.
                ("{\"id\":1}".to_string(), None),
                ("{\"id\":2}".to_string(), None),
            ]
        );
        let mut skipped = 0;
        let read = layout
            .decode(
                &records,
                &mut SideReaders::default(),
                |i| format!("record {i}"),
                &mut skipped,
                true,
            )
            .unwrap()
            .unwrap();
        assert_eq!(read.line_of_row, [0, 1, 2, 3]);
        let read = read.chunk;
        let ids = read
            .rows()
            .column(0)
            .as_any()
            .downcast_ref::<Int64Array>()
            .unwrap();
        let names = read
            .rows()
            .column(1)
            .as_any()
            .downcast_ref::<StringArray>()
            .unwrap();
        assert_eq!(ids.values().to_vec(), vec![1, 2, 1, 2]);
        assert_eq!(
            (names.value(0), names.value(1), names.is_null(3)),
            ("a", "b", true)
        );
        assert_eq!(
            (0..4).map(|i| read.op(i)).collect::<Vec<_>>(),
            [Op::UpdateAfter, Op::UpdateAfter, Op::Delete, Op::Delete]
        );
        assert_eq!(records.reduced().len(), 2, "one record per key");
        // An update's `-U` and `+U` make the new row alone.
        let pair = RecordBatch::try_new(
            schema(),
            vec![
                Arc::new(Int64Array::from(vec![3, 3])),
                Arc::new(StringArray::from(vec![Some("old"), Some("new")])),
            ],
        )
        .unwrap();
        let mut update = KeyedRecords::default();
        let pair = Chunk::from_ops(pair, vec![Op::UpdateBefore, Op::UpdateAfter]);
        block_on(layout.encode(&pair, &mut SideWriters::default(), &mut update)).unwrap();
        assert_eq!(update.len(), 1);
        let mut state = eddy_common::state::StateWriter::new();
        records.save(&mut state);
        let bytes = state.finish();
        let mut input = eddy_common::state::StateReader::new(&bytes, "records");
        assert_eq!(KeyedRecords::load(&mut input).unwrap(), records);
    }

    #[test]
    fn bad_records_are_named_or_skipped_and_bad_options_refused() {
        let strict = layout(&[]).unwrap();
        let mut records = KeyedRecords::default();
        records.push(b"{\"k_id\":1}", Some(b"{\"k_id\":1,\"name\":\"x\"}"));
        records.push(b"", Some(b"{\"k_id\":2}"));
        records.push(b"{\"k_id\":\"three\"}", None);
        let mut skipped = 0;
        let error = strict
            .decode(
                &records,
                &mut SideReaders::default(),
                |i| format!("record {i}"),
                &mut skipped,
                true,
            )
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("record 1: ") && error.contains("without a key"),
            "{error}"
        );
        let lenient = UpsertLayout {
            ignore_parse_errors: true,
            ..strict.clone()
        };
        let read = lenient
            .decode(
                &records,
                &mut SideReaders::default(),
                |i| format!("record {i}"),
                &mut skipped,
                true,
            )
            .unwrap()
            .unwrap();
        assert_eq!((read.chunk.num_rows(), skipped), (1, 2));
        assert_eq!(read.line_of_row, [0], "the good record's line");
        for (extra, expected) in [
            (
                vec![("key.fields-prefix", "k_")],
                "needs 'value.fields-include'",
            ),
            (
                vec![("value.fields-include", "SOME")],
                "expected ALL or EXCEPT_KEY",
            ),
            (vec![("key.format", "debezium-json")], "not a change"),
            (
                vec![("sink.buffer-flush.max-rows", "10")],
                "must both be set",
            ),
            (vec![("key.json.bogus", "1")], "unknown option 'json.bogus'"),
        ] {
            let error = layout(&extra).unwrap_err().to_string();
            assert!(error.contains(expected), "{extra:?}: {error}");
        }
    }
}
