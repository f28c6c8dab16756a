//! A source task: reading its connector, checkpointing between reads (or, for a stateless
//! source vertex, while a send blocks), and waiting for the final checkpoint at its end.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use eddy_common::Result;
use eddy_common::checkpoint::{CompletedCheckpoint, TaskSnapshot};
use eddy_common::chunk::Chunk;
use eddy_common::event::{Barrier, Timestamp};
use eddy_common::ids::TaskKey;
use eddy_common::metrics::{OperatorMetrics, TaskMetrics};
use eddy_common::state::OperatorState;
use eddy_connectors::{SourceContext, SourceEvent, SourceReader};
use eddy_operators::watermark::SplitWatermarks;
use eddy_planner::plan::SourceSpec;
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::sync::watch;

use super::{Pipeline, Snapshot, StopSignal, TaskEnd, Uploader, requested_end};
use crate::operator_chain::OperatorChain;
use crate::output::PriorityLanes;

/// A source task's way to take an unaligned checkpoint while a send blocks: its operators
/// hold no state, so its snapshot is its position, and the barrier goes on the priority
/// lanes, whose counts already include the chunk being sent.
struct Overtake {
    lanes: PriorityLanes,
    uploader: Uploader,
    operators: usize,
}

impl Overtake {
    fn checkpoint(&self, barrier: Barrier, position: Vec<u8>) -> Result<()> {
        let snapshot = Snapshot {
            task: TaskSnapshot {
                source: Some(position),
                operators: vec![OperatorState::full(Bytes::new()); self.operators],
                in_flight: Vec::new(),
                sink: None,
            },
            previous: Vec::new(),
            full_estimate: 0,
        };
        self.lanes.send(barrier)?;
        self.uploader
            .upload(barrier, snapshot, Duration::ZERO, Duration::ZERO);
        Ok(())
    }
}

/// The newest trigger waiting, if any (older ones are superseded).
fn latest_trigger(triggers: &mut Option<UnboundedReceiver<Barrier>>) -> Option<Barrier> {
    let triggers = triggers.as_mut()?;
    let mut latest = None;
    while let Ok(barrier) = triggers.try_recv() {
        latest = Some(barrier);
    }
    latest
}

/// Reads a source task's input until it ends (then takes part in checkpoints until the
/// final one completed) or a stop arrives.
pub(super) async fn run_source(
    source: &SourceSpec,
    mut reader: Box<dyn SourceReader>,
    context: SourceContext,
    scan: OperatorChain,
    pipeline: &mut Pipeline<'_>,
    stop: &mut StopSignal,
    stateless: Option<usize>,
) -> Result<TaskEnd> {
    let splits = reader.open().await?;
    let overtake = match (stateless, pipeline.uploader()) {
        (Some(operators), Some(uploader)) => Some(Overtake {
            lanes: pipeline.output.priority_lanes(),
            uploader,
            operators,
        }),
        _ => None,
    };
    let mut run = SourceRun {
        reader,
        scan,
        watermarks: source
            .watermark
            .clone()
            .map(|expr| SplitWatermarks::new(expr, splits)),
        triggers: pipeline
            .checkpointing
            .as_mut()
            .and_then(|c| c.triggers.take()),
        overtake,
        deferred: None,
        metrics: context.metrics.clone(),
    };
    loop {
        if let Some(request) = *stop.borrow() {
            return Ok(request.end());
        }
        // Triggers are taken between reads, so a barrier sits exactly between the rows
        // read before and after it.
        if let Some(barrier) = run
            .deferred
            .take()
            .or_else(|| latest_trigger(&mut run.triggers))
        {
            run.checkpoint(pipeline, barrier).await?;
        }
        // Reading is work while the reader computes (a generator) or decodes, not while it
        // waits for data or paces itself: only the time its future is polled counts.
        let event = tokio::select! {
            biased;
            changed = stop.changed() => return Ok(requested_end(stop, changed)),
            event = polled(run.reader.next(), pipeline.metrics) => event?,
        };
        let working = Instant::now();
        let new_watermark = match event {
            None => break,
            Some(SourceEvent::Rows { split, rows }) => run.emit(pipeline, split, rows).await?,
            Some(SourceEvent::Idle) => None,
            Some(SourceEvent::SplitEnd(split)) => {
                run.watermarks.as_mut().and_then(|w| w.end_split(split))
            }
        };
        if let Some(watermark) = new_watermark {
            pipeline.advance(watermark).await?;
        }
        pipeline.metrics.worked(working.elapsed());
    }
    run.end_of_input(pipeline, stop).await
}

/// A source task's reading, between reads.
struct SourceRun {
    reader: Box<dyn SourceReader>,
    /// The operators chained to the scan.
    scan: OperatorChain,
    watermarks: Option<SplitWatermarks>,
    /// Checkpoint triggers from the JobManager, if the job checkpoints.
    triggers: Option<UnboundedReceiver<Barrier>>,
    overtake: Option<Overtake>,
    /// An aligned barrier that arrived while a send blocked: taken before the next read.
    deferred: Option<Barrier>,
    metrics: Arc<OperatorMetrics>,
}

impl SourceRun {
    /// Takes checkpoint `barrier` at the reader's position.
    async fn checkpoint(&mut self, pipeline: &mut Pipeline<'_>, barrier: Barrier) -> Result<()> {
        let position = self.reader.position(barrier.checkpoint)?;
        pipeline
            .checkpoint(barrier, Some(position), Duration::ZERO)
            .await
    }

    /// Sends the rows read from `split` through the scan's operators; the watermark they
    /// advance, if any.
    async fn emit(
        &mut self,
        pipeline: &mut Pipeline<'_>,
        split: usize,
        rows: Chunk,
    ) -> Result<Option<Timestamp>> {
        let count = rows.num_rows();
        OperatorMetrics::add(&self.metrics.records_out, count as u64);
        pipeline
            .metrics
            .taken_in(count, rows.rows().get_array_memory_size());
        let mut watermark = None;
        let chunks = self.scan.process(rows)?;
        let single = chunks.len() == 1;
        for chunk in chunks {
            if let Some(w) = self.watermarks.as_mut() {
                watermark = w.observe(split, chunk.rows())?.or(watermark);
            }
            match single {
                true => self.send_overtakable(pipeline, chunk).await?,
                false => pipeline.emit(chunk).await?,
            }
        }
        Ok(watermark)
    }

    /// A bounded source has ended: event time is complete, so every window can fire. With
    /// checkpoints, the source stays until a checkpoint taken after every source ended has
    /// completed: that final checkpoint covers all output, so two-phase-commit sinks can
    /// commit the last rows, and a failure before it replays them.
    async fn end_of_input(
        mut self,
        pipeline: &mut Pipeline<'_>,
        stop: &mut StopSignal,
    ) -> Result<TaskEnd> {
        pipeline.advance(Timestamp::MAX).await?;
        let Some(checkpointing) = pipeline.checkpointing.as_ref() else {
            return Ok(TaskEnd::Finished);
        };
        let completed = checkpointing.completed.clone();
        let _ = checkpointing
            .input_ended
            .send(TaskKey::new(pipeline.vertex, pipeline.subtask));
        pipeline.input_ended = true;
        if let Some(barrier) = self.deferred.take() {
            self.checkpoint(pipeline, barrier).await?;
        }
        self.wait_for_final_checkpoint(pipeline, stop, completed)
            .await
    }

    /// Sends a chunk. A source vertex that can overtake (see [`Overtake`]) keeps taking
    /// triggers while the send blocks (backpressure): an unaligned barrier still goes out
    /// at once (at the reader's position), and an aligned one is deferred to the next read.
    async fn send_overtakable(&mut self, pipeline: &mut Pipeline<'_>, chunk: Chunk) -> Result<()> {
        let (Some(overtake), Some(pending)) = (&self.overtake, self.triggers.as_mut()) else {
            return pipeline.emit(chunk).await;
        };
        let emit = pipeline.emit(chunk);
        tokio::pin!(emit);
        loop {
            tokio::select! {
                biased;
                sent = &mut emit => return sent,
                Some(barrier) = pending.recv() => {
                    if barrier.unaligned && self.deferred.is_none() {
                        let position = self.reader.position(barrier.checkpoint)?;
                        overtake.checkpoint(barrier, position)?;
                    } else {
                        self.deferred = Some(barrier);
                    }
                }
            }
        }
    }

    /// Takes part in checkpoints after the source's end until one taken after every source
    /// ended has completed.
    async fn wait_for_final_checkpoint(
        &mut self,
        pipeline: &mut Pipeline<'_>,
        stop: &mut StopSignal,
        mut completed: watch::Receiver<CompletedCheckpoint>,
    ) -> Result<TaskEnd> {
        let mut triggers = self.triggers.take();
        let mut emitted_after_end = None;
        loop {
            let notice = *completed.borrow_and_update();
            if notice.end_of_input
                && emitted_after_end.is_some_and(|first| notice.checkpoint >= first)
            {
                return Ok(TaskEnd::Finished);
            }
            let trigger = async {
                match triggers.as_mut() {
                    Some(t) => t.recv().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                biased;
                changed = stop.changed() => return Ok(requested_end(stop, changed)),
                // The job is gone from this TaskManager: its tasks are being cancelled.
                changed = completed.changed() => if changed.is_err() { return Ok(TaskEnd::Cancelled) },
                Some(barrier) = trigger => {
                    self.checkpoint(pipeline, barrier).await?;
                    emitted_after_end.get_or_insert(barrier.checkpoint);
                }
            }
        }
    }
}

/// Runs `future`, counting the time spent in its polls (not the time it waits) as work.
async fn polled<F: std::future::Future>(future: F, metrics: &TaskMetrics) -> F::Output {
    let mut future = std::pin::pin!(future);
    std::future::poll_fn(|cx| {
        let started = Instant::now();
        let result = future.as_mut().poll(cx);
        metrics.worked(started.elapsed());
        result
    })
    .await
}
