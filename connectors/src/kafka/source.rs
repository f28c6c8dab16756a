//! Reads one subtask's share of a topic: partition `k` goes to subtask `k % parallelism`,
//! each partition is a split (its own watermark), and positions are exact offsets.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use eddy_common::metrics::OperatorMetrics;
use eddy_common::state::{StateReader, StateWriter};
use eddy_common::{EddyError, Result};
use futures::FutureExt;
use futures::future::BoxFuture;
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};

use super::metadata::{MetadataColumns, RecordFacts};
use super::upsert::{KeyedRecords, SideReaders};
use super::{KafkaConnector, StartupMode, kafka_error};
use crate::format::{Format, LinePosition, MessageReader, Messages};
use crate::{SourceContext, SourceEvent, SourceReader};

/// How long a read waits for records before it lets the task take a checkpoint.
const IDLE: Duration = Duration::from_millis(100);
/// How long metadata requests may take.
const METADATA_TIMEOUT: Duration = Duration::from_secs(10);

/// One assigned partition.
struct Partition {
    id: i32,
    /// The next offset to read.
    next: i64,
    /// Where a bounded read ends (exclusive).
    end: Option<i64>,
    ended: bool,
}

/// Records of one partition gathered into lines (values), or, for upsert-kafka, into
/// keyed records, or, for Avro and Protobuf, into messages.
struct Batch {
    split: usize,
    first_offset: i64,
    lines: Vec<u8>,
    messages: Messages,
    keyed: KeyedRecords,
    records: usize,
    /// Each record's metadata, when the table reads some.
    facts: RecordFacts,
}

/// What one gathering of records found.
enum Gathered {
    /// Records of one partition, to decode.
    Batch(Batch),
    /// No records, but something to say (a partition ended, or nothing came).
    Event(SourceEvent),
}

/// A record read: its offset, timestamp, key and value (`None`: a tombstone).
struct Record {
    offset: i64,
    timestamp: rdkafka::Timestamp,
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
}

pub(super) struct KafkaReader {
    connector: Arc<KafkaConnector>,
    context: SourceContext,
    /// The columns the format decodes (the schema without the metadata columns).
    physical: arrow::datatypes::SchemaRef,
    metadata: MetadataColumns,
    /// Decodes the values of an Avro or Protobuf table.
    framed: Option<MessageReader>,
    /// Decodes upsert-kafka's keys and values in Avro or Protobuf.
    sides: SideReaders,
    consumer: Option<Arc<StreamConsumer>>,
    partitions: Vec<Partition>,
    /// Offsets restored from a checkpoint, by partition.
    restored: HashMap<i32, i64>,
    /// A record read past the batch being built (another partition's).
    carried: Option<(usize, Record)>,
}

impl KafkaReader {
    pub fn new(
        connector: Arc<KafkaConnector>,
        context: &SourceContext,
        metadata: MetadataColumns,
        framed: Option<MessageReader>,
        sides: SideReaders,
    ) -> Self {
        let physical = context.physical_schema();
        KafkaReader {
            connector,
            context: context.clone(),
            physical,
            metadata,
            framed,
            sides,
            consumer: None,
            partitions: Vec::new(),
            restored: HashMap::new(),
            carried: None,
        }
    }

    async fn connect(&mut self) -> Result<usize> {
        let connector = self.connector.clone();
        let group = format!("eddy-{}", connector.table);
        let consumer: StreamConsumer = connector
            .client_config(&[
                ("group.id", &group),
                ("enable.auto.commit", "false"),
                ("enable.partition.eof", "true"),
                ("isolation.level", "read_committed"),
            ])
            .create()
            .map_err(|e| kafka_error(&connector, "creating a consumer", e))?;
        let consumer = Arc::new(consumer);
        let (subtask, parallelism) = (self.context.subtask, self.context.parallelism.max(1));
        let restored = self.restored.clone();
        let blocking = consumer.clone();
        let partitions = tokio::task::spawn_blocking(move || -> Result<Vec<Partition>> {
            let topic = &connector.topic;
            let metadata = blocking
                .fetch_metadata(Some(topic), METADATA_TIMEOUT)
                .map_err(|e| kafka_error(&connector, "reading the topic's metadata", e))?;
            let count = metadata
                .topics()
                .iter()
                .find(|t| t.name() == topic)
                .map_or(0, |t| t.partitions().len()) as i32;
            if count == 0 {
                return Err(connector.error(format!("topic '{topic}' does not exist")));
            }
            let mut mine = Vec::new();
            for id in (0..count).filter(|k| *k as usize % parallelism == subtask) {
                let (low, high) = blocking
                    .fetch_watermarks(topic, id, METADATA_TIMEOUT)
                    .map_err(|e| kafka_error(&connector, "reading partition offsets", e))?;
                let next = match (restored.get(&id), connector.startup) {
                    (Some(offset), _) => *offset,
                    (None, StartupMode::Earliest) => low,
                    (None, StartupMode::Latest) => high,
                };
                let end = connector.bounded.then_some(high);
                mine.push(Partition {
                    id,
                    next,
                    end,
                    ended: end.is_some_and(|end| next >= end),
                });
            }
            Ok(mine)
        })
        .await
        .map_err(|e| EddyError::Internal(format!("reading Kafka metadata panicked: {e}")))??;
        let mut assignment = TopicPartitionList::new();
        for partition in partitions.iter().filter(|p| !p.ended) {
            assignment
                .add_partition_offset(
                    &self.connector.topic,
                    partition.id,
                    Offset::Offset(partition.next),
                )
                .map_err(|e| kafka_error(&self.connector, "assigning partitions", e))?;
        }
        consumer
            .assign(&assignment)
            .map_err(|e| kafka_error(&self.connector, "assigning partitions", e))?;
        self.partitions = partitions;
        self.consumer = Some(consumer);
        Ok(self.partitions.len())
    }

    fn split_of(&self, partition: i32) -> Option<usize> {
        self.partitions.iter().position(|p| p.id == partition)
    }

    /// A split that has reached its end and is not yet reported.
    fn newly_ended(&mut self) -> Option<usize> {
        let split = self
            .partitions
            .iter()
            .position(|p| !p.ended && p.end.is_some_and(|end| p.next >= end))?;
        self.partitions[split].ended = true;
        Some(split)
    }

    async fn read(&mut self) -> Result<Option<SourceEvent>> {
        let Some(consumer) = self.consumer.clone() else {
            return Err(EddyError::Internal("kafka reader used before open".into()));
        };
        if let Some(split) = self.newly_ended() {
            return Ok(Some(SourceEvent::SplitEnd(split)));
        }
        if !self.partitions.is_empty() && self.partitions.iter().all(|p| p.ended) {
            return Ok(None);
        }
        if self.partitions.is_empty() {
            return match self.connector.bounded {
                true => Ok(None),
                false => {
                    tokio::time::sleep(IDLE).await;
                    Ok(Some(SourceEvent::Idle))
                }
            };
        }
        match self.gather(&consumer).await? {
            Gathered::Batch(batch) => {
                if let Some(framed) = &mut self.framed {
                    let ids = framed.unknown_ids(batch.messages.iter());
                    framed.fetch(ids).await?;
                }
                if self.connector.upsert.is_some() {
                    self.sides.prepare(&batch.keyed).await?;
                }
                self.decode_batch(batch).map(Some)
            }
            Gathered::Event(event) => Ok(Some(event)),
        }
    }

    /// Up to a batch of records of one partition: the record carried over from the last
    /// call, then what the consumer has within [`IDLE`]. A record of another partition is
    /// carried over to the next call.
    async fn gather(&mut self, consumer: &StreamConsumer) -> Result<Gathered> {
        let mut batch: Option<Batch> = None;
        if let Some((split, record)) = self.carried.take() {
            let mut b = self.start_batch(split, record.offset);
            let (key, value) = (record.key.as_deref(), record.value.as_deref());
            self.append(&mut b, record.offset, record.timestamp, key, value);
            batch = Some(b);
        }
        let max = self.context.batch_size.max(1);
        while batch.as_ref().is_none_or(|b| b.records < max) {
            let received = match tokio::time::timeout(IDLE, consumer.recv()).await {
                Err(_) => break,
                Ok(received) => received,
            };
            let message = match received {
                Ok(message) => message,
                Err(KafkaError::PartitionEOF(partition)) => {
                    // Caught up with the log: a bounded read of this partition is done.
                    if let Some(split) = self.split_of(partition)
                        && self.connector.bounded
                    {
                        let p = &mut self.partitions[split];
                        p.end = Some(p.end.unwrap_or(0).min(p.next));
                    }
                    if batch.is_some() {
                        break;
                    }
                    if let Some(split) = self.newly_ended() {
                        return Ok(Gathered::Event(SourceEvent::SplitEnd(split)));
                    }
                    continue;
                }
                Err(e) => return Err(kafka_error(&self.connector, "reading", e)),
            };
            let Some(split) = self.split_of(message.partition()) else {
                continue;
            };
            let (offset, timestamp) = (message.offset(), message.timestamp());
            let (key, value) = (message.key(), message.payload());
            match &mut batch {
                Some(b) if b.split != split => {
                    let record = Record {
                        offset,
                        timestamp,
                        key: key.map(<[u8]>::to_vec),
                        value: value.map(<[u8]>::to_vec),
                    };
                    self.carried = Some((split, record));
                    break;
                }
                Some(b) => self.append(b, offset, timestamp, key, value),
                None => {
                    let mut b = self.start_batch(split, offset);
                    self.append(&mut b, offset, timestamp, key, value);
                    batch = Some(b);
                }
            }
        }
        Ok(match batch {
            Some(batch) => Gathered::Batch(batch),
            None => Gathered::Event(SourceEvent::Idle),
        })
    }

    /// A batch's records decoded into rows (with their metadata columns).
    fn decode_batch(&mut self, batch: Batch) -> Result<SourceEvent> {
        let partition = self.partitions[batch.split].id;
        let topic = format!(
            "topic '{}' partition {partition}, offset",
            self.connector.topic
        );
        let position = LinePosition {
            file: &topic,
            first_line: batch.first_offset as u64,
        };
        let traced = !self.metadata.is_empty();
        let decoded = match (&self.connector.upsert, &mut self.framed) {
            (_, Some(framed)) => framed.decode(
                &batch.messages,
                position,
                self.connector.ignore_parse_errors,
                &self.context.metrics,
                traced,
            )?,
            (Some(layout), None) => {
                let mut skipped = 0;
                let describe = |i: usize| {
                    format!(
                        "record {} of the batch from {topic} {}",
                        i + 1,
                        batch.first_offset
                    )
                };
                let decoded = layout.decode(
                    &batch.keyed,
                    &mut self.sides,
                    describe,
                    &mut skipped,
                    traced,
                )?;
                OperatorMetrics::add(&self.context.metrics.parse_errors_skipped, skipped);
                decoded
            }
            (None, None) => self.connector.format.decode_traced(
                &self.physical,
                &batch.lines,
                position,
                self.connector.ignore_parse_errors,
                &self.context.metrics,
                traced.then(|| self.metadata.facts()),
            )?,
        };
        let decoded = match decoded {
            Some(d) if traced => {
                let (schema, topic) = (&self.context.schema, &self.connector.topic);
                Some(
                    self.metadata
                        .append(d, schema, topic, partition, &batch.facts)?,
                )
            }
            other => other.map(|d| d.chunk),
        };
        OperatorMetrics::add(&self.context.metrics.records_in, batch.records as u64);
        Ok(match decoded {
            Some(rows) => SourceEvent::Rows {
                split: batch.split,
                rows,
            },
            None => SourceEvent::Idle,
        })
    }

    fn start_batch(&self, split: usize, offset: i64) -> Batch {
        Batch {
            split,
            first_offset: offset,
            lines: Vec::new(),
            messages: Messages::default(),
            keyed: KeyedRecords::default(),
            records: 0,
            facts: RecordFacts::default(),
        }
    }

    fn append(
        &mut self,
        batch: &mut Batch,
        offset: i64,
        timestamp: rdkafka::Timestamp,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
    ) {
        match (&self.connector.upsert, &self.framed) {
            (_, Some(framed)) => batch
                .messages
                .push_prefixed(framed.record_prefix(), value.unwrap_or_default()),
            // A record without a key decodes as one with an empty key: an error naming it.
            (Some(_), None) => batch.keyed.push(key.unwrap_or_default(), value),
            (None, None) => push_line(
                &mut batch.lines,
                value.unwrap_or_default(),
                &self.connector.format,
            ),
        }
        if !self.metadata.is_empty() {
            batch.facts.push(offset, timestamp);
        }
        batch.records += 1;
        self.partitions[batch.split].next = offset + 1;
    }
}

/// Appends a record's value as one line. A JSON value written over several lines is
/// joined into one (a line break outside a string is whitespace, and JSON strings hold
/// none), so that each line is a record and errors name its offset.
fn push_line(lines: &mut Vec<u8>, value: &[u8], format: &Format) {
    match format {
        Format::Json(_) | Format::Debezium(_) | Format::Canal(_) | Format::Maxwell(_)
            if value.contains(&b'\n') =>
        {
            lines.extend(value.iter().map(|b| match b {
                b'\n' => b' ',
                other => *other,
            }))
        }
        _ => lines.extend_from_slice(value),
    }
    lines.push(b'\n');
}

impl SourceReader for KafkaReader {
    fn open(&mut self) -> BoxFuture<'_, Result<usize>> {
        self.connect().boxed()
    }

    fn next(&mut self) -> BoxFuture<'_, Result<Option<SourceEvent>>> {
        self.read().boxed()
    }

    fn position(&mut self, _checkpoint: u64) -> Result<Vec<u8>> {
        let mut offsets: BTreeMap<i32, i64> = self.restored.clone().into_iter().collect();
        for partition in &self.partitions {
            offsets.insert(partition.id, partition.next);
        }
        // A record carried over to the next batch has not been emitted yet.
        if let Some((split, record)) = &self.carried {
            offsets.insert(self.partitions[*split].id, record.offset);
        }
        let mut out = StateWriter::new();
        out.u64(offsets.len() as u64);
        for (partition, offset) in offsets {
            out.u64(partition as u64).u64(offset as u64);
        }
        Ok(out.finish())
    }

    fn restore(&mut self, positions: &[&[u8]]) -> Result<()> {
        for bytes in positions {
            let what = format!("the offsets of Kafka table '{}'", self.connector.table);
            let mut input = StateReader::new(bytes, &what);
            for _ in 0..input.count(16)? {
                let partition = input.u64()? as i32;
                let offset = input.u64()? as i64;
                self.restored.insert(partition, offset);
            }
        }
        Ok(())
    }
}
