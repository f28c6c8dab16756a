//! One subtask: reads its source or input channels, runs its operator chain, and writes
//! to its output, until its input ends or it is told to stop.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use eddy_common::Result;
use eddy_common::chunk::Chunk;
use eddy_common::connectors::{SinkContext, SourceContext, SourceEvent};
use eddy_common::event::{Event, Timestamp};
use eddy_common::metrics::{JobMetrics, OperatorMetrics};
use eddy_common::operators::watermark::SplitWatermarks;
use eddy_common::plan::{JobGraph, SourceSpec, VertexOutput};
use tokio::sync::mpsc::{Receiver, Sender};
use tokio::sync::watch;

use crate::chain::OperatorChain;
use crate::input::{Input, InputGate};
use crate::output::{ExchangeOutput, TaskOutput};

/// Everything a subtask needs to run.
pub struct TaskDeployment {
    /// The job's graph.
    pub graph: Arc<JobGraph>,
    /// Which vertex.
    pub vertex: usize,
    /// Which subtask of it.
    pub subtask: usize,
    /// Its input channels (none for a source).
    pub inputs: Vec<Receiver<Event>>,
    /// Its output channels (none for a sink).
    pub outputs: Vec<Sender<Event>>,
    /// The job's counters.
    pub metrics: Arc<JobMetrics>,
    /// This task's own counters.
    pub counters: Arc<TaskCounters>,
}

/// Rows a task took in (read from its source or received) and sent on (to the next
/// vertex or into its sink).
#[derive(Debug, Default)]
pub struct TaskCounters {
    /// Rows in.
    pub records_in: AtomicU64,
    /// Rows out.
    pub records_out: AtomicU64,
}

impl TaskCounters {
    /// The current (in, out) counts.
    pub fn get(&self) -> (u64, u64) {
        (
            self.records_in.load(Ordering::Relaxed),
            self.records_out.load(Ordering::Relaxed),
        )
    }
}

impl TaskDeployment {
    /// `v{vertex}[{subtask}]`, for logs.
    pub fn name(&self) -> String {
        format!(
            "{}[{}]",
            self.graph.vertices[self.vertex].name(),
            self.subtask
        )
    }
}

/// How a subtask ended without error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskEnd {
    /// Its input ended (bounded sources).
    Finished,
    /// It was told to stop.
    Stopped,
}

/// Runs a subtask to its end. Setting `stop` to true ends sources cleanly: what has been
/// read flows through and sinks flush. Aborting the task's future cancels it outright.
pub async fn run_task(
    deployment: TaskDeployment,
    mut stop: watch::Receiver<bool>,
) -> Result<TaskEnd> {
    let graph = deployment.graph.clone();
    let vertex = &graph.vertices[deployment.vertex];
    let name = deployment.name();
    let prefix = vertex.name();
    let mut chain = OperatorChain::build(&vertex.operators, &prefix, &deployment.metrics)?;
    let mut output = match &vertex.output {
        VertexOutput::Sink(sink) => {
            let context = SinkContext {
                table: sink.table.clone(),
                schema: sink.schema.clone(),
                subtask: deployment.subtask,
                parallelism: vertex.parallelism,
                metrics: deployment
                    .metrics
                    .operator(&format!("{prefix}/Sink:{}", sink.table)),
            };
            TaskOutput::Sink {
                writer: sink.connector.create_writer(&context)?,
                schema: sink.schema.clone(),
                table: sink.table.clone(),
            }
        }
        VertexOutput::Exchange { partitioning, .. } => TaskOutput::Exchange(ExchangeOutput::new(
            deployment.outputs,
            partitioning,
            graph.config.max_parallelism,
            deployment.metrics.operator(&format!("{prefix}/Exchange")),
        )),
    };
    tracing::debug!(task = %name, "task started");
    let mut pipeline = Pipeline {
        chain: &mut chain,
        output: &mut output,
        counters: &deployment.counters,
    };
    let end = match &vertex.source {
        Some(source) => {
            let context = SourceContext {
                table: source.table.clone(),
                schema: source.schema.clone(),
                subtask: deployment.subtask,
                parallelism: vertex.parallelism,
                batch_size: graph.config.batch_size,
                metrics: deployment
                    .metrics
                    .operator(&format!("{prefix}/Source:{}", source.table)),
            };
            let scan = OperatorChain::build(
                &source.scan_operators,
                &format!("{prefix}/scan"),
                &deployment.metrics,
            )?;
            run_source(source, context, scan, &mut pipeline, &mut stop).await?
        }
        None => run_inputs(InputGate::new(deployment.inputs), &mut pipeline).await?,
    };
    output.finish().await?;
    tracing::debug!(task = %name, ?end, "task ended");
    Ok(end)
}

/// The operator chain and output of one running task, with its counters.
struct Pipeline<'a> {
    chain: &'a mut OperatorChain,
    output: &'a mut TaskOutput,
    counters: &'a TaskCounters,
}

impl Pipeline<'_> {
    async fn send(&mut self, chunks: Vec<Chunk>) -> Result<()> {
        let rows: usize = chunks.iter().map(Chunk::num_rows).sum();
        OperatorMetrics::add(&self.counters.records_out, rows as u64);
        self.output.send(chunks).await
    }

    /// Runs rows through the chain and sends what comes out.
    async fn emit(&mut self, chunk: Chunk) -> Result<()> {
        let chunks = self.chain.process(chunk)?;
        self.send(chunks).await
    }

    /// Advances event time: what the watermark completes is sent, then the watermark.
    async fn advance(&mut self, watermark: Timestamp) -> Result<()> {
        let chunks = self.chain.on_watermark(watermark)?;
        self.send(chunks).await?;
        self.output.watermark(watermark).await
    }
}

async fn run_source(
    source: &SourceSpec,
    context: SourceContext,
    mut scan: OperatorChain,
    pipeline: &mut Pipeline<'_>,
    stop: &mut watch::Receiver<bool>,
) -> Result<TaskEnd> {
    let source_metrics = context.metrics.clone();
    let mut reader = source.connector.create_reader(&context)?;
    let splits = reader.open().await?;
    let mut watermarks = source
        .watermark
        .clone()
        .map(|expr| SplitWatermarks::new(expr, splits));
    loop {
        if *stop.borrow() {
            return Ok(TaskEnd::Stopped);
        }
        let event = tokio::select! {
            biased;
            _ = stop.changed() => return Ok(TaskEnd::Stopped),
            event = reader.next() => event?,
        };
        let new_watermark = match event {
            None => break,
            Some(SourceEvent::Rows { split, rows }) => {
                let count = rows.num_rows() as u64;
                OperatorMetrics::add(&source_metrics.records_out, count);
                OperatorMetrics::add(&pipeline.counters.records_in, count);
                let mut watermark = None;
                for chunk in scan.process(Chunk::inserts(rows))? {
                    if let Some(w) = watermarks.as_mut() {
                        watermark = w.observe(split, chunk.rows())?.or(watermark);
                    }
                    pipeline.emit(chunk).await?;
                }
                watermark
            }
            Some(SourceEvent::SplitEnd(split)) => {
                watermarks.as_mut().and_then(|w| w.end_split(split))
            }
        };
        if let Some(watermark) = new_watermark {
            pipeline.advance(watermark).await?;
        }
    }
    // A bounded source has ended: event time is complete, so every window can fire.
    pipeline.advance(Timestamp::MAX).await?;
    Ok(TaskEnd::Finished)
}

/// Runs a task fed by channels until all of them have ended (a stop reaches it as the
/// end of its inputs, once the sources have stopped).
async fn run_inputs(mut gate: InputGate, pipeline: &mut Pipeline<'_>) -> Result<TaskEnd> {
    while let Some(input) = gate.next().await? {
        match input {
            Input::Data(chunk) => {
                OperatorMetrics::add(&pipeline.counters.records_in, chunk.num_rows() as u64);
                pipeline.emit(chunk).await?
            }
            Input::Watermark(t) => pipeline.advance(t).await?,
        }
    }
    Ok(TaskEnd::Finished)
}
