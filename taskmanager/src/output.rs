//! Where a task's rows go: a sink writer, or the channels to the next vertex's subtasks,
//! partitioned as the plan says. Sending blocks while a channel is full, which is how
//! backpressure reaches the sources; the time blocked is counted.
//!
//! An unaligned barrier goes out twice on every channel: at once on the priority lane,
//! overtaking the queued data, and into the channel itself right behind the data counted
//! before it. Between TaskManagers the two travel apart, and rows sent after the barrier
//! can arrive before its priority copy; the copy in the channel makes sure the receiver
//! knows of the barrier before it reads any of them.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use eddy_common::chunk::Chunk;
use eddy_common::event::{Barrier, Event, StreamEnd, Timestamp};
use eddy_common::metrics::{OperatorMetrics, TaskMetrics};
use eddy_common::{EddyError, Result};
use eddy_connectors::SinkWriter;
use eddy_operators::partition::HashPartitioner;
use eddy_planner::plan::Partitioning;
use tokio::sync::mpsc::UnboundedSender;
use tokio::sync::mpsc::error::TrySendError;

use crate::exchange::{OutputChannel, PriorityBarrier};

/// The output of one task.
pub enum TaskOutput {
    /// Rows are written to a sink table.
    Sink {
        /// The sink's writer for this subtask.
        writer: Box<dyn SinkWriter>,
        /// The table's columns (names and NOT NULL constraints).
        schema: SchemaRef,
        /// The table's name.
        table: String,
    },
    /// Rows go to the next vertex.
    Exchange(ExchangeOutput),
}

/// Channels to the next vertex's subtasks.
pub struct ExchangeOutput {
    senders: Vec<OutputChannel>,
    lanes: Arc<Lanes>,
    /// Data events written into each channel.
    written: Vec<u64>,
    router: Router,
    metrics: Arc<OperatorMetrics>,
    /// The sending task's metrics, for the fill of its output queues.
    task: Arc<TaskMetrics>,
}

/// What the channels share with their priority lanes, which a source uses while a send
/// blocks.
struct Lanes {
    /// Data events sent (or being sent) on each channel, for unaligned barriers.
    sent: Vec<AtomicU64>,
    /// Per channel, the unaligned barriers still to be written into it, each with the
    /// data events counted before it.
    markers: Mutex<Vec<VecDeque<(u64, Barrier)>>>,
    /// Some channel has a barrier to write (spares the hot path the lock).
    marked: AtomicBool,
}

impl Lanes {
    fn new(channels: usize) -> Self {
        Lanes {
            sent: (0..channels).map(|_| AtomicU64::new(0)).collect(),
            markers: Mutex::new(vec![VecDeque::new(); channels]),
            marked: AtomicBool::new(false),
        }
    }

    /// The barrier to write into channel `target` now that `written` data events are in
    /// it, if one was counted behind exactly those.
    fn marker_due(&self, target: usize, written: u64) -> Option<Barrier> {
        if !self.marked.load(Ordering::Acquire) {
            return None;
        }
        let mut markers = self.markers.lock().expect("markers lock");
        let queue = &mut markers[target];
        debug_assert!(
            queue
                .front()
                .is_none_or(|(position, _)| *position >= written)
        );
        let (_, barrier) = queue.pop_front_if(|(position, _)| *position == written)?;
        if markers.iter().all(VecDeque::is_empty) {
            self.marked.store(false, Ordering::Release);
        }
        Some(barrier)
    }
}

enum Router {
    Forward,
    Hash(HashPartitioner),
    RoundRobin(usize),
}

impl ExchangeOutput {
    /// Sends to `senders` (one per receiving subtask, or the single forward channel).
    pub fn new(
        senders: Vec<OutputChannel>,
        partitioning: &Partitioning,
        max_parallelism: usize,
        metrics: Arc<OperatorMetrics>,
        task: Arc<TaskMetrics>,
    ) -> Self {
        let router = match partitioning {
            Partitioning::Forward | Partitioning::Single => Router::Forward,
            Partitioning::Hash { keys, .. } => Router::Hash(HashPartitioner::new(
                keys.clone(),
                max_parallelism,
                senders.len(),
            )),
            Partitioning::Rebalance => Router::RoundRobin(0),
        };
        ExchangeOutput {
            lanes: Arc::new(Lanes::new(senders.len())),
            written: vec![0; senders.len()],
            senders,
            router,
            metrics,
            task,
        }
    }

    /// Sends one event, after any unaligned barrier due in front of it; data events must
    /// have been counted in `sent` first.
    async fn send_to(&mut self, target: usize, event: Event) -> Result<()> {
        while let Some(barrier) = self.lanes.marker_due(target, self.written[target]) {
            self.write(target, Event::Barrier(barrier)).await?;
        }
        let data = matches!(event, Event::Data(_));
        self.write(target, event).await?;
        self.written[target] += u64::from(data);
        Ok(())
    }

    async fn write(&self, target: usize, event: Event) -> Result<()> {
        let sender = &self.senders[target].data;
        match sender.try_send(event) {
            Ok(()) => {
                self.task.output_queue(
                    sender.max_capacity() - sender.capacity(),
                    sender.max_capacity(),
                );
                Ok(())
            }
            Err(TrySendError::Full(event)) => {
                self.task
                    .output_queue(sender.max_capacity(), sender.max_capacity());
                let blocked = Instant::now();
                let result = sender.send(event).await;
                OperatorMetrics::add(
                    &self.metrics.backpressure_nanos,
                    blocked.elapsed().as_nanos() as u64,
                );
                result.map_err(|_| downstream_gone(target))
            }
            Err(TrySendError::Closed(_)) => Err(downstream_gone(target)),
        }
    }

    async fn send_chunk(&mut self, chunk: Chunk) -> Result<()> {
        OperatorMetrics::add(&self.metrics.records_out, chunk.num_rows() as u64);
        match &mut self.router {
            Router::Forward => {
                self.lanes.sent[0].fetch_add(1, Ordering::Relaxed);
                self.send_to(0, Event::Data(chunk)).await
            }
            Router::RoundRobin(next) => {
                let target = *next % self.senders.len();
                *next = target + 1;
                self.lanes.sent[target].fetch_add(1, Ordering::Relaxed);
                self.send_to(target, Event::Data(chunk)).await
            }
            Router::Hash(partitioner) => {
                let parts = partitioner.partition(&chunk)?;
                // Count every part before sending any: an unaligned barrier taken while a
                // send blocks must count the whole chunk as sent before it.
                for (target, part) in parts.iter().enumerate() {
                    if part.is_some() {
                        self.lanes.sent[target].fetch_add(1, Ordering::Relaxed);
                    }
                }
                for (target, part) in parts.into_iter().enumerate() {
                    if let Some(part) = part {
                        self.send_to(target, Event::Data(part)).await?;
                    }
                }
                Ok(())
            }
        }
    }

    async fn broadcast(&mut self, event: Event) -> Result<()> {
        for target in 0..self.senders.len() {
            self.send_to(target, event.clone()).await?;
        }
        Ok(())
    }

    /// Puts the end of stream into every channel with room for it, without waiting.
    fn offer_end(&self, end: StreamEnd) {
        for sender in &self.senders {
            let _ = sender.data.try_send(Event::End(end));
        }
    }

    /// Sends a barrier: in order behind the data (aligned), or on every channel's priority
    /// lane with the count of data events sent before it, and into the channel behind them
    /// (unaligned).
    async fn barrier(&mut self, barrier: Barrier) -> Result<()> {
        if !barrier.unaligned {
            return self.broadcast(Event::Barrier(barrier)).await;
        }
        self.priority_lanes().send(barrier)
    }

    /// A handle on the priority lanes, usable while a send is blocked.
    pub fn priority_lanes(&self) -> PriorityLanes {
        PriorityLanes {
            senders: self.senders.iter().map(|c| c.priority.clone()).collect(),
            lanes: Some(self.lanes.clone()),
        }
    }
}

/// The priority lanes of a task's output channels, with the counts of data events sent.
#[derive(Clone, Default)]
pub struct PriorityLanes {
    senders: Vec<UnboundedSender<PriorityBarrier>>,
    lanes: Option<Arc<Lanes>>,
}

impl PriorityLanes {
    /// Sends an unaligned barrier on every lane, with the data events sent before it, and
    /// has it written into each channel behind those.
    pub fn send(&self, barrier: Barrier) -> Result<()> {
        let Some(lanes) = &self.lanes else {
            return Ok(());
        };
        let mut markers = lanes.markers.lock().expect("markers lock");
        for (target, lane) in self.senders.iter().enumerate() {
            let sent = lanes.sent[target].load(Ordering::Relaxed);
            lane.send(PriorityBarrier { barrier, sent })
                .map_err(|_| downstream_gone(target))?;
            // A newer barrier at the same place supersedes an unwritten older one (that
            // checkpoint is over: done or aborted), so a channel without traffic does not
            // pile them up. At most two wait: the place a blocked send is at, and past it.
            let queue = &mut markers[target];
            match queue.back_mut() {
                Some((position, older)) if *position == sent => *older = barrier,
                _ => queue.push_back((sent, barrier)),
            }
        }
        lanes.marked.store(true, Ordering::Release);
        Ok(())
    }
}

fn downstream_gone(target: usize) -> EddyError {
    EddyError::Exchange(format!("downstream subtask {target} is gone"))
}

impl TaskOutput {
    /// The priority lanes of an exchange (none for a sink).
    pub fn priority_lanes(&self) -> PriorityLanes {
        match self {
            TaskOutput::Sink { .. } => PriorityLanes::default(),
            TaskOutput::Exchange(exchange) => exchange.priority_lanes(),
        }
    }

    /// Emits chunks.
    pub async fn send(&mut self, chunks: Vec<Chunk>) -> Result<()> {
        for chunk in chunks {
            if chunk.is_empty() {
                continue;
            }
            match self {
                TaskOutput::Sink {
                    writer,
                    schema,
                    table,
                } => {
                    let rows =
                        RecordBatch::try_new(schema.clone(), chunk.rows().columns().to_vec())
                            .map_err(|e| EddyError::Connector {
                                table: table.clone(),
                                message: format!("rows do not fit its schema: {e}"),
                            })?;
                    writer.write(&chunk.with_rows(rows)).await?;
                }
                TaskOutput::Exchange(exchange) => exchange.send_chunk(chunk).await?,
            }
        }
        Ok(())
    }

    /// Forwards a watermark (to the next vertex, or to the sink writer).
    pub async fn watermark(&mut self, watermark: Timestamp) -> Result<()> {
        match self {
            TaskOutput::Sink { writer, .. } => {
                writer.watermark(watermark);
                Ok(())
            }
            TaskOutput::Exchange(exchange) => exchange.broadcast(Event::Watermark(watermark)).await,
        }
    }

    /// Forwards a checkpoint barrier after everything sent before it; a sink makes what
    /// it was given durable (or prepares it) and returns its state for the snapshot.
    pub async fn barrier(&mut self, barrier: Barrier) -> Result<Option<Vec<u8>>> {
        match self {
            TaskOutput::Sink { writer, .. } => {
                writer.checkpoint(barrier.checkpoint).await.map(Some)
            }
            TaskOutput::Exchange(exchange) => exchange.barrier(barrier).await.map(|()| None),
        }
    }

    /// Whether a sink holds no rows back for a later transaction (always, for channels).
    pub fn settled(&self) -> bool {
        match self {
            TaskOutput::Sink { writer, .. } => writer.settled(),
            TaskOutput::Exchange(_) => true,
        }
    }

    /// Ends the output as the task ended (`end`): the sink finishes (see
    /// [`SinkWriter::finish`]), channels get their end of stream with the reason. A
    /// cancelled task does not wait for room in a full channel: a channel that cannot take
    /// the end closes, which its receiver takes for a failure.
    pub async fn finish(&mut self, end: StreamEnd) -> Result<()> {
        match self {
            TaskOutput::Sink { writer, .. } => writer.finish(end).await,
            TaskOutput::Exchange(exchange) if end == StreamEnd::Cancelled => {
                exchange.offer_end(end);
                Ok(())
            }
            TaskOutput::Exchange(exchange) => exchange.broadcast(Event::End(end)).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use arrow::array::Int64Array;
    use arrow::datatypes::{DataType, Field, Schema};

    use crate::exchange::{InputChannel, local_channel};

    use super::*;

    fn chunk(v: i64) -> Chunk {
        let schema = Arc::new(Schema::new(vec![Field::new("v", DataType::Int64, false)]));
        Chunk::inserts(
            RecordBatch::try_new(schema, vec![Arc::new(Int64Array::from(vec![v]))]).unwrap(),
        )
    }

    fn describe(event: Event) -> String {
        match event {
            Event::Data(chunk) => {
                let values = chunk.rows().column(0).as_any().downcast_ref::<Int64Array>();
                values.unwrap().value(0).to_string()
            }
            Event::Barrier(b) => format!("b{}", b.checkpoint),
            other => format!("{other:?}"),
        }
    }

    fn unaligned(checkpoint: u64) -> Barrier {
        Barrier {
            checkpoint,
            triggered_at: 0,
            unaligned: true,
        }
    }

    fn forward(capacity: usize) -> (ExchangeOutput, InputChannel) {
        let (tx, rx) = local_channel(capacity);
        let metrics = Arc::new(OperatorMetrics::default());
        let output = ExchangeOutput::new(
            vec![tx],
            &Partitioning::Forward,
            128,
            metrics,
            Arc::default(),
        );
        (output, rx)
    }

    #[tokio::test]
    async fn an_unaligned_barrier_is_written_behind_exactly_the_data_counted_before_it() {
        let (mut output, mut rx) = forward(1);
        let lanes = output.priority_lanes();
        output.send_chunk(chunk(1)).await.unwrap();
        // The channel is full: sending 2 blocks after counting it, as a source's send does
        // when it checkpoints mid-send.
        let sending = tokio::spawn(async move {
            output.send_chunk(chunk(2)).await.unwrap();
            output.send_chunk(chunk(3)).await.unwrap();
        });
        tokio::task::yield_now().await;
        let barrier = unaligned(7);
        lanes.send(barrier).unwrap();
        let priority = rx.priority.recv().await.unwrap();
        assert_eq!((priority.barrier, priority.sent), (barrier, 2));
        let mut seen = Vec::new();
        for _ in 0..4 {
            seen.push(describe(rx.data.recv().await.unwrap()));
        }
        assert_eq!(seen, vec!["1", "2", "b7", "3"]);
        sending.await.unwrap();
    }

    #[tokio::test]
    async fn barriers_on_an_idle_channel_leave_only_the_newest_to_write() {
        let (mut output, mut rx) = forward(8);
        let lanes = output.priority_lanes();
        for checkpoint in 1..=3 {
            lanes.send(unaligned(checkpoint)).unwrap();
        }
        output.send_chunk(chunk(1)).await.unwrap();
        let seen = [rx.data.recv().await, rx.data.recv().await].map(|e| describe(e.unwrap()));
        assert_eq!(seen, ["b3".to_string(), "1".to_string()]);
        assert!(
            rx.data.try_recv().is_err(),
            "the older barriers are not written"
        );
        for checkpoint in 1..=3 {
            assert_eq!(
                rx.priority.recv().await.unwrap().barrier,
                unaligned(checkpoint)
            );
        }
    }
}
