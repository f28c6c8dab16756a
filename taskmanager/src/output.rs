//! Where a task's rows go: a sink writer, or the channels to the next vertex's subtasks,
//! partitioned as the plan says. Sending blocks while a channel is full, which is how
//! backpressure reaches the sources; the time blocked is counted.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use eddy_common::chunk::Chunk;
use eddy_common::connectors::SinkWriter;
use eddy_common::event::{Barrier, Event, Timestamp};
use eddy_common::metrics::OperatorMetrics;
use eddy_common::partition::HashPartitioner;
use eddy_common::plan::Partitioning;
use eddy_common::{EddyError, Result};

use crate::exchange::{OutputChannel, PriorityBarrier};

use tokio::sync::mpsc::UnboundedSender;
use tokio::sync::mpsc::error::TrySendError;

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
    /// Data events sent (or being sent) on each channel, for unaligned barriers.
    sent: Arc<Vec<AtomicU64>>,
    router: Router,
    metrics: Arc<OperatorMetrics>,
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
            sent: Arc::new(senders.iter().map(|_| AtomicU64::new(0)).collect()),
            senders,
            router,
            metrics,
        }
    }

    /// Sends one event; data events must have been counted in `sent` first.
    async fn send_to(&self, target: usize, event: Event) -> Result<()> {
        let sender = &self.senders[target].data;
        match sender.try_send(event) {
            Ok(()) => Ok(()),
            Err(TrySendError::Full(event)) => {
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
                self.sent[0].fetch_add(1, Ordering::Relaxed);
                self.send_to(0, Event::Data(chunk)).await
            }
            Router::RoundRobin(next) => {
                let target = *next % self.senders.len();
                *next = target + 1;
                self.sent[target].fetch_add(1, Ordering::Relaxed);
                self.send_to(target, Event::Data(chunk)).await
            }
            Router::Hash(partitioner) => {
                let parts = partitioner.partition(&chunk)?;
                // Count every part before sending any: an unaligned barrier taken while a
                // send blocks must count the whole chunk as sent before it.
                for (target, part) in parts.iter().enumerate() {
                    if part.is_some() {
                        self.sent[target].fetch_add(1, Ordering::Relaxed);
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

    async fn broadcast(&self, event: Event) -> Result<()> {
        for target in 0..self.senders.len() {
            self.send_to(target, event.clone()).await?;
        }
        Ok(())
    }

    /// Sends a barrier: in order behind the data (aligned), or on every channel's priority
    /// lane with the count of data events sent before it (unaligned).
    async fn barrier(&self, barrier: Barrier) -> Result<()> {
        if !barrier.unaligned {
            return self.broadcast(Event::Barrier(barrier)).await;
        }
        self.priority_lanes().send(barrier)
    }

    /// A handle on the priority lanes, usable while a send is blocked.
    pub fn priority_lanes(&self) -> PriorityLanes {
        PriorityLanes {
            senders: self.senders.iter().map(|c| c.priority.clone()).collect(),
            sent: self.sent.clone(),
        }
    }
}

/// The priority lanes of a task's output channels, with the counts of data events sent.
#[derive(Clone, Default)]
pub struct PriorityLanes {
    senders: Vec<UnboundedSender<PriorityBarrier>>,
    sent: Arc<Vec<AtomicU64>>,
}

impl PriorityLanes {
    /// Sends an unaligned barrier on every lane, with the data events sent before it.
    pub fn send(&self, barrier: Barrier) -> Result<()> {
        for (target, lane) in self.senders.iter().enumerate() {
            let sent = self.sent[target].load(Ordering::Relaxed);
            lane.send(PriorityBarrier { barrier, sent })
                .map_err(|_| downstream_gone(target))?;
        }
        Ok(())
    }
}

fn downstream_gone(target: usize) -> EddyError {
    EddyError::Runtime(format!("downstream subtask {target} is gone"))
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
                            .map_err(|e| {
                                EddyError::Runtime(format!("writing to table '{table}': {e}"))
                            })?;
                    writer.write(&chunk.with_rows(rows)).await?;
                }
                TaskOutput::Exchange(exchange) => exchange.send_chunk(chunk).await?,
            }
        }
        Ok(())
    }

    /// Forwards a watermark (sinks have no use for it).
    pub async fn watermark(&mut self, watermark: Timestamp) -> Result<()> {
        match self {
            TaskOutput::Sink { .. } => Ok(()),
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

    /// Ends the output: the sink flushes and closes, channels get their end of stream.
    /// `end_of_input` says the input ended rather than the task being stopped.
    pub async fn finish(&mut self, end_of_input: bool) -> Result<()> {
        match self {
            TaskOutput::Sink { writer, .. } => writer.finish(end_of_input).await,
            TaskOutput::Exchange(exchange) => exchange.broadcast(Event::EndOfStream).await,
        }
    }
}
