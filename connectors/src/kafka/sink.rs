//! Writes one sink subtask's rows to a topic, one record per row: at least once through
//! an idempotent producer flushed at each checkpoint, or exactly once as a write-ahead
//! two-phase commit (see the module documentation of `kafka`).

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex, Weak};
use std::time::Duration;

use eddy_common::chunk::Chunk;
use eddy_common::event::StreamEnd;
use eddy_common::metrics::OperatorMetrics;
use eddy_common::state::{StateReader, StateWriter};
use eddy_common::{EddyError, Result};
use futures::FutureExt;
use futures::future::BoxFuture;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{
    BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext, ThreadedProducer,
};
use rdkafka::{ClientContext, Offset, TopicPartitionList};

use super::upsert::{KeyedRecords, SideWriters};
use super::{KafkaConnector, kafka_error};
use crate::format::{MessageWriter, Messages};
use crate::transaction::{
    DeliveryGuarantee, TransactionCommitter, TransactionWriter, TwoPhaseCommitSink,
};
use crate::{SinkContext, SinkWriter};

/// How long a flush or a transaction step may take.
const TIMEOUT: Duration = Duration::from_secs(30);

/// Per job and writer id, the lock its commits take in this process, from the marker check
/// to the transaction's end, and the newest checkpoint committed under it: two commits of
/// one checkpoint in one process (a cancelled attempt's sink still committing beside the
/// next attempt's, or a cancelled sink beside its own committer) would otherwise both find
/// the marker missing and write the records twice. Entries live while a commit holds them.
static COMMIT_TURNS: LazyLock<Mutex<HashMap<String, Weak<Mutex<u64>>>>> =
    LazyLock::new(Mutex::default);

/// The commit lock of `writer` (a job's id and a writer id) in this process; entries no
/// commit holds any more are dropped on the way.
fn commit_turn(writer: String) -> Arc<Mutex<u64>> {
    let mut turns = COMMIT_TURNS.lock().expect("commit turns lock");
    if let Some(turn) = turns.get(&writer).and_then(Weak::upgrade) {
        return turn;
    }
    turns.retain(|_, turn| turn.strong_count() > 0);
    let turn = Arc::new(Mutex::new(0));
    turns.insert(writer, Arc::downgrade(&turn));
    turn
}

/// The writer of one sink subtask.
pub(super) fn create(
    connector: Arc<KafkaConnector>,
    context: &SinkContext,
) -> Result<Box<dyn SinkWriter>> {
    if connector.guarantee != DeliveryGuarantee::ExactlyOnce {
        return Ok(Box::new(IdempotentProducer::new(connector, context)?));
    }
    let prefix = connector
        .transactional_id_prefix
        .clone()
        .unwrap_or_else(|| format!("eddy-{}-{}", context.execution.job, connector.table));
    let writer_id = format!("{prefix}-{}", context.subtask);
    let writer = WriteAhead {
        connector: connector.clone(),
        writer_id: writer_id.clone(),
        job: context.execution.job.to_string(),
        outbox: Outbox::new(&connector, context)?,
        metrics: context.metrics.clone(),
    };
    let committer = KafkaTransactions(Arc::new(Transactions {
        connector,
        transactional_id: writer_id,
        producer: Mutex::new(None),
        markers: Mutex::new(HashMap::new()),
    }));
    Ok(Box::new(TwoPhaseCommitSink::new(
        context,
        Box::new(writer),
        Arc::new(committer),
    )?))
}

/// Sends one record (a key, if any, and a value or, `None`, a tombstone), waiting while
/// the producer's queue is full.
fn send(
    producer: &BaseProducer,
    topic: &str,
    key: Option<&[u8]>,
    payload: Option<&[u8]>,
) -> std::result::Result<(), KafkaError> {
    let mut record = keyed_record(topic, key, payload);
    loop {
        match producer.send(record) {
            Ok(()) => return Ok(()),
            Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                record = back;
                producer.poll(Duration::from_millis(10));
            }
            Err((e, _)) => return Err(e),
        }
    }
}

/// A record to send.
fn keyed_record<'a>(
    topic: &'a str,
    key: Option<&'a [u8]>,
    payload: Option<&'a [u8]>,
) -> BaseRecord<'a, [u8], [u8]> {
    let mut record = BaseRecord::<[u8], [u8]>::to(topic);
    if let Some(key) = key {
        record = record.key(key);
    }
    if let Some(payload) = payload {
        record = record.payload(payload);
    }
    record
}

/// A sink subtask's records not yet sent or prepared, as its table's format makes them,
/// and the writers that make them.
struct Outbox {
    /// A line format's records, a line each.
    lines: Vec<u8>,
    /// upsert-kafka's records.
    keyed: KeyedRecords,
    /// Avro or Protobuf records, and their writer.
    messages: Messages,
    framed: Option<MessageWriter>,
    /// upsert-kafka's writers of keys and values in Avro or Protobuf.
    sides: SideWriters,
}

impl Outbox {
    fn new(connector: &KafkaConnector, context: &SinkContext) -> Result<Self> {
        let sides = match &connector.upsert {
            Some(layout) => layout.writers()?,
            None => SideWriters::default(),
        };
        Ok(Outbox {
            lines: Vec::new(),
            keyed: KeyedRecords::default(),
            messages: Messages::default(),
            framed: MessageWriter::new(&connector.format, &connector.table, &context.schema)
                .transpose()?,
            sides,
        })
    }

    /// Adds the records of a chunk: keyed records for upsert-kafka, else one record a row
    /// (a chunk of inserts only).
    async fn add(&mut self, connector: &KafkaConnector, chunk: &Chunk) -> Result<()> {
        if let Some(layout) = &connector.upsert {
            return layout.encode(chunk, &mut self.sides, &mut self.keyed).await;
        }
        if !chunk.is_append_only() {
            return Err(
                connector.error("a Kafka table takes inserts only (an append-only stream)".into())
            );
        }
        match &mut self.framed {
            Some(writer) => writer.encode(chunk.rows(), &mut self.messages).await,
            None => connector.format.encode(chunk.rows(), &mut self.lines),
        }
    }

    /// The records of a row each (lines or messages), in order.
    fn rows(&self) -> impl Iterator<Item = &[u8]> + '_ {
        let lines = self.lines.split(|b| *b == b'\n').filter(|l| !l.is_empty());
        lines.chain(self.messages.iter())
    }

    /// Whether nothing is held.
    fn is_empty(&self) -> bool {
        self.lines.is_empty() && self.keyed.is_empty() && self.messages.is_empty()
    }

    /// Forgets the records of a row each (not the keyed ones).
    fn clear_rows(&mut self) {
        self.lines.clear();
        self.messages.clear();
    }

    /// Forgets every record.
    fn clear(&mut self) {
        self.clear_rows();
        self.keyed.clear();
    }
}

/// Exactly once: a checkpoint's records, kept until the checkpoint completes.
struct WriteAhead {
    connector: Arc<KafkaConnector>,
    /// Names the transactions and their markers.
    writer_id: String,
    /// The job's id, kept with each marker: a writer id of a user's transactional-id
    /// prefix is the same in every job using the prefix, and another job's marker says
    /// nothing of this job's checkpoints.
    job: String,
    outbox: Outbox,
    metrics: Arc<OperatorMetrics>,
}

impl TransactionWriter for WriteAhead {
    fn write<'a>(&'a mut self, chunk: &'a Chunk) -> BoxFuture<'a, Result<()>> {
        async move {
            self.outbox.add(&self.connector, chunk).await?;
            OperatorMetrics::add(&self.metrics.records_in, chunk.num_rows() as u64);
            Ok(())
        }
        .boxed()
    }

    fn prepare(&mut self, checkpoint: u64) -> BoxFuture<'_, Result<Option<Vec<u8>>>> {
        let handle = (!self.outbox.is_empty()).then(|| {
            let Outbox {
                lines,
                keyed,
                messages,
                ..
            } = &mut self.outbox;
            let mut out = StateWriter::new();
            out.bytes(self.writer_id.as_bytes())
                .u64(checkpoint)
                .bytes(lines)
                .bytes(self.job.as_bytes());
            // Within one transaction only a key's last record matters to a reader.
            match (&self.connector.upsert, self.connector.buffer_flush()) {
                (None, _) if !messages.is_empty() => {
                    // Avro and Protobuf records follow an empty set of keyed records.
                    keyed.save(&mut out);
                    messages.save(&mut out);
                }
                (None, _) => {}
                (Some(_), Some(_)) => keyed.reduced().save(&mut out),
                (Some(_), None) => keyed.save(&mut out),
            }
            self.outbox.clear();
            out.finish()
        });
        async move { Ok(handle) }.boxed()
    }

    fn abort(&mut self) -> BoxFuture<'_, Result<()>> {
        self.outbox.clear();
        async { Ok(()) }.boxed()
    }
}

/// A prepared transaction: its writer, checkpoint, records and job.
struct Prepared {
    writer_id: String,
    checkpoint: u64,
    lines: Vec<u8>,
    /// Empty in transactions prepared before markers named their job.
    job: String,
    /// upsert-kafka's records (after the job, in transactions of upsert-kafka sinks).
    keyed: KeyedRecords,
    /// Avro or Protobuf records (after an empty set of keyed records, in transactions of
    /// their sinks).
    messages: Messages,
}

impl Prepared {
    fn decode(handle: &[u8]) -> Result<Prepared> {
        let mut input = StateReader::new(handle, "a Kafka sink transaction");
        let text = |bytes: &[u8], what: &str| {
            String::from_utf8(bytes.to_vec())
                .map_err(|_| EddyError::Internal(format!("a Kafka {what} is not UTF-8")))
        };
        let writer_id = text(input.bytes()?, "writer id")?;
        let checkpoint = input.u64()?;
        let lines = input.bytes()?.to_vec();
        let job = match input.is_empty() {
            true => String::new(),
            false => text(input.bytes()?, "job id")?,
        };
        let keyed = match input.is_empty() {
            true => KeyedRecords::default(),
            false => KeyedRecords::load(&mut input)?,
        };
        let messages = match input.is_empty() {
            true => Messages::default(),
            false => Messages::load(&mut input)?,
        };
        Ok(Prepared {
            writer_id,
            checkpoint,
            lines,
            job,
            keyed,
            messages,
        })
    }

    /// Whether `marker` (a checkpoint and the job that committed it) says this transaction
    /// is in the topic already: a marker of this job (or of a time before markers named
    /// jobs) at this checkpoint or later.
    fn covered_by(&self, marker: &Option<(u64, String)>) -> bool {
        marker.as_ref().is_some_and(|(done, job)| {
            *done >= self.checkpoint && (job.is_empty() || self.job.is_empty() || *job == self.job)
        })
    }
}

/// Produces prepared transactions, on a transactional producer of its own.
struct KafkaTransactions(Arc<Transactions>);

struct Transactions {
    connector: Arc<KafkaConnector>,
    transactional_id: String,
    /// Initialized (fencing earlier producers with the same id) on first use.
    producer: Mutex<Option<BaseProducer>>,
    /// A consumer per marker group, to read and commit markers.
    markers: Mutex<HashMap<String, BaseConsumer>>,
}

impl Transactions {
    fn error(&self, doing: &str, e: KafkaError) -> EddyError {
        kafka_error(&self.connector, doing, e)
    }

    /// The producer, made and initialized if needed.
    fn with_producer<T>(&self, work: impl FnOnce(&BaseProducer) -> Result<T>) -> Result<T> {
        let mut slot = self.producer.lock().expect("producer lock");
        if slot.is_none() {
            let producer: BaseProducer = self
                .connector
                .producer_config(&[("transactional.id", &self.transactional_id)])
                .create()
                .map_err(|e| self.error("creating a transactional producer", e))?;
            producer
                .init_transactions(TIMEOUT)
                .map_err(|e| self.error("initializing transactions", e))?;
            tracing::debug!(writer = %self.transactional_id, "transactional producer initialized");
            *slot = Some(producer);
        }
        let result = work(slot.as_ref().expect("producer"));
        if result.is_err() {
            // A failed transaction leaves the producer in doubt: the next try starts a new
            // one, whose initialization aborts whatever this one left open.
            if let Some(producer) = slot.take() {
                let _ = producer.abort_transaction(TIMEOUT);
            }
        }
        result
    }

    /// The consumer of marker group `group`.
    fn with_marker<T>(
        &self,
        group: &str,
        work: impl FnOnce(&BaseConsumer) -> Result<T>,
    ) -> Result<T> {
        let mut markers = self.markers.lock().expect("markers lock");
        if !markers.contains_key(group) {
            let consumer: BaseConsumer = self
                .connector
                .client_config(&[
                    ("group.id", group),
                    ("enable.auto.commit", "false"),
                    ("isolation.level", "read_committed"),
                ])
                .create()
                .map_err(|e| self.error("creating a marker consumer", e))?;
            markers.insert(group.to_string(), consumer);
        }
        work(&markers[group])
    }

    /// The last checkpoint whose transaction writer `group` committed, and the job that
    /// committed it (empty for markers of before markers named jobs).
    fn committed_checkpoint(&self, group: &str) -> Result<Option<(u64, String)>> {
        let mut partition = TopicPartitionList::new();
        partition.add_partition(&self.connector.topic, 0);
        self.with_marker(group, |consumer| {
            let committed = consumer
                .committed_offsets(partition, TIMEOUT)
                .map_err(|e| self.error("reading a commit marker", e))?;
            let Some(marker) = committed.elements().into_iter().next() else {
                return Ok(None);
            };
            // An error for the partition (a transaction with offsets still pending, a
            // coordinator loading) says nothing of the marker: never "no marker".
            marker
                .error()
                .map_err(|e| self.error("reading a commit marker", e))?;
            Ok(match marker.offset() {
                Offset::Offset(n) if n >= 0 => Some((n as u64, marker.metadata().to_string())),
                _ => None,
            })
        })
    }

    fn commit(&self, handle: &[u8]) -> Result<()> {
        let prepared = Prepared::decode(handle)?;
        let turn = commit_turn(format!("{}/{}", prepared.job, prepared.writer_id));
        let mut committed = turn.lock().expect("writer commit lock");
        if *committed >= prepared.checkpoint {
            tracing::debug!(checkpoint = prepared.checkpoint, writer = %prepared.writer_id, "already committed by this process");
            return Ok(());
        }
        self.commit_once(&prepared)?;
        *committed = prepared.checkpoint;
        Ok(())
    }

    /// Commits `prepared` unless its marker says it is in the topic already.
    fn commit_once(&self, prepared: &Prepared) -> Result<()> {
        // The producer is initialized first: that fences every earlier producer with this
        // id, so a marker missing now cannot be committed by one of them meanwhile.
        self.with_producer(|_| Ok(()))?;
        let marker = self.committed_checkpoint(&prepared.writer_id)?;
        if prepared.covered_by(&marker) {
            tracing::debug!(checkpoint = prepared.checkpoint, writer = %prepared.writer_id, "already in the topic");
            return Ok(());
        }
        let group = self.with_marker(&prepared.writer_id, |consumer| {
            consumer.group_metadata().ok_or_else(|| {
                self.connector
                    .error("a marker consumer has no group".into())
            })
        })?;
        let topic = &self.connector.topic;
        self.with_producer(|producer| {
            producer
                .begin_transaction()
                .map_err(|e| self.error("beginning a transaction", e))?;
            for line in prepared
                .lines
                .split(|b| *b == b'\n')
                .filter(|l| !l.is_empty())
            {
                send(producer, topic, None, Some(line)).map_err(|e| self.error("producing", e))?;
            }
            for (key, value) in prepared.keyed.iter() {
                send(producer, topic, Some(key), value).map_err(|e| self.error("producing", e))?;
            }
            for record in prepared.messages.iter() {
                send(producer, topic, None, Some(record))
                    .map_err(|e| self.error("producing", e))?;
            }
            let mut marker = TopicPartitionList::new();
            marker
                .add_partition_offset(topic, 0, Offset::Offset(prepared.checkpoint as i64))
                .map_err(|e| self.error("building a commit marker", e))?;
            if let Some(mut entry) = marker.find_partition(topic, 0) {
                entry.set_metadata(&prepared.job);
            }
            producer
                .send_offsets_to_transaction(&marker, &group, TIMEOUT)
                .map_err(|e| self.error("committing the marker", e))?;
            producer
                .commit_transaction(TIMEOUT)
                .map_err(|e| self.error("committing a transaction", e))
        })?;
        tracing::debug!(
            checkpoint = prepared.checkpoint,
            writer = %prepared.writer_id,
            previous = ?marker,
            bytes = prepared.lines.len() + prepared.messages.byte_len(),
            keyed = prepared.keyed.len(),
            "committed to the topic"
        );
        Ok(())
    }
}

impl TransactionCommitter for KafkaTransactions {
    fn commit<'a>(&'a self, handle: &'a [u8]) -> BoxFuture<'a, Result<()>> {
        let inner = self.0.clone();
        let handle = handle.to_vec();
        async move {
            tokio::task::spawn_blocking(move || inner.commit(&handle))
                .await
                .map_err(|e| EddyError::Internal(format!("a Kafka commit panicked: {e}")))?
        }
        .boxed()
    }

    /// Initializing the transactional producer fences earlier producers with its id and
    /// aborts what they left open; nothing else is left prepared in Kafka.
    fn abort_leftovers<'a>(&'a self, _keep: &'a [Vec<u8>]) -> BoxFuture<'a, Result<()>> {
        let inner = self.0.clone();
        async move {
            tokio::task::spawn_blocking(move || inner.with_producer(|_| Ok(())))
                .await
                .map_err(|e| EddyError::Internal(format!("a Kafka producer panicked: {e}")))?
        }
        .boxed()
    }
}

/// Remembers the first failed delivery of an idempotent producer.
#[derive(Default)]
struct DeliveryErrors(Mutex<Option<String>>);

impl ClientContext for DeliveryErrors {}

impl ProducerContext for DeliveryErrors {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        if let Err((e, _)) = result {
            self.0
                .lock()
                .expect("delivery errors lock")
                .get_or_insert_with(|| e.to_string());
        }
    }
}

/// At least once: an idempotent producer, flushed at each checkpoint and at the end.
struct IdempotentProducer {
    connector: Arc<KafkaConnector>,
    producer: Arc<ThreadedProducer<DeliveryErrors>>,
    /// The records of a chunk being sent; upsert-kafka's keyed records not yet sent: with
    /// `sink.buffer-flush.*`, until the buffer holds that many records or is that old (each
    /// key's last record is sent).
    outbox: Outbox,
    buffered_since: Option<std::time::Instant>,
    metrics: Arc<OperatorMetrics>,
}

impl IdempotentProducer {
    fn new(connector: Arc<KafkaConnector>, context: &SinkContext) -> Result<Self> {
        let producer = connector
            .producer_config(&[("enable.idempotence", "true")])
            .create_with_context(DeliveryErrors::default())
            .map_err(|e| kafka_error(&connector, "creating a producer", e))?;
        Ok(IdempotentProducer {
            outbox: Outbox::new(&connector, context)?,
            connector,
            producer: Arc::new(producer),
            buffered_since: None,
            metrics: context.metrics.clone(),
        })
    }

    /// Sends one record, waiting while the producer's queue is full.
    async fn send(&self, key: Option<&[u8]>, payload: Option<&[u8]>) -> Result<()> {
        let mut record = keyed_record(&self.connector.topic, key, payload);
        loop {
            match self.producer.send(record) {
                Ok(()) => return Ok(()),
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                    record = back;
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                Err((e, _)) => return Err(kafka_error(&self.connector, "producing", e)),
            }
        }
    }

    /// Sends the keyed records held back (each key's last one when buffering).
    async fn send_keyed(&mut self) -> Result<()> {
        let mut records = std::mem::take(&mut self.outbox.keyed);
        if self.connector.buffer_flush().is_some() {
            records = records.reduced();
        }
        self.buffered_since = None;
        for (key, value) in records.iter() {
            self.send(Some(key), value).await?;
        }
        Ok(())
    }

    /// Whether the keyed records held back are due: always without buffering, else when
    /// the buffer is full or old.
    fn keyed_due(&self) -> bool {
        match self.connector.buffer_flush() {
            None => true,
            Some((rows, interval)) => {
                self.outbox.keyed.len() >= rows
                    || self
                        .buffered_since
                        .is_some_and(|since| since.elapsed() >= interval)
            }
        }
    }

    /// Waits until everything sent is acknowledged; fails on any failed delivery.
    async fn flush(&self) -> Result<()> {
        let producer = self.producer.clone();
        tokio::task::spawn_blocking(move || producer.flush(TIMEOUT))
            .await
            .map_err(|e| EddyError::Internal(format!("a Kafka flush panicked: {e}")))?
            .map_err(|e| kafka_error(&self.connector, "flushing", e))?;
        match self
            .producer
            .context()
            .0
            .lock()
            .expect("delivery errors lock")
            .take()
        {
            Some(error) => Err(self
                .connector
                .error(format!("a record was not delivered: {error}"))),
            None => Ok(()),
        }
    }
}

impl SinkWriter for IdempotentProducer {
    fn write<'a>(&'a mut self, chunk: &'a Chunk) -> BoxFuture<'a, Result<()>> {
        async move {
            self.outbox.add(&self.connector, chunk).await?;
            for record in self.outbox.rows() {
                self.send(None, Some(record)).await?;
            }
            self.outbox.clear_rows();
            if !self.outbox.keyed.is_empty() {
                self.buffered_since
                    .get_or_insert_with(std::time::Instant::now);
                if self.keyed_due() {
                    self.send_keyed().await?;
                }
            }
            OperatorMetrics::add(&self.metrics.records_in, chunk.num_rows() as u64);
            Ok(())
        }
        .boxed()
    }

    fn checkpoint(&mut self, _checkpoint: u64) -> BoxFuture<'_, Result<Vec<u8>>> {
        async move {
            self.send_keyed().await?;
            self.flush().await.map(|()| Vec::new())
        }
        .boxed()
    }

    fn settled(&self) -> bool {
        self.outbox.keyed.is_empty()
    }

    fn finish(&mut self, _end: StreamEnd) -> BoxFuture<'_, Result<()>> {
        async move {
            // A stop or cancel sends what is held back too: at least once, a restore may
            // send it again.
            self.send_keyed().await?;
            self.flush().await
        }
        .boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn handle(job: Option<&str>) -> Vec<u8> {
        let mut out = StateWriter::new();
        out.bytes(b"prefix-0").u64(7).bytes(b"a\nb\n");
        if let Some(job) = job {
            out.bytes(job.as_bytes());
        }
        out.finish()
    }

    #[test]
    fn a_marker_covers_the_checkpoints_of_its_own_job_only() {
        let prepared = Prepared::decode(&handle(Some("job-2"))).unwrap();
        assert_eq!((prepared.checkpoint, prepared.job.as_str()), (7, "job-2"));
        let marker = |done, job: &str| Some((done, job.to_string()));
        assert!(prepared.covered_by(&marker(7, "job-2")));
        assert!(prepared.covered_by(&marker(9, "job-2")));
        assert!(!prepared.covered_by(&marker(6, "job-2")));
        assert!(!prepared.covered_by(&None));
        // Another job sharing the transactional-id prefix went further: not this job's.
        assert!(!prepared.covered_by(&marker(500, "job-1")));
        // Markers of before markers named jobs are trusted as they were.
        assert!(prepared.covered_by(&marker(7, "")));
    }

    #[test]
    fn a_transaction_prepared_before_markers_named_jobs_is_read() {
        let prepared = Prepared::decode(&handle(None)).unwrap();
        assert_eq!(prepared.job, "");
        assert_eq!(prepared.lines, b"a\nb\n");
        assert!(prepared.covered_by(&Some((7, "job-1".into()))));
    }
}
