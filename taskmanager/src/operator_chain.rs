//! A chain of operators run inside one task: each operator's output feeds the next
//! directly, with no channel and no copy.

use std::sync::Arc;

use bytes::Bytes;
use eddy_common::chunk::Chunk;
use eddy_common::event::Timestamp;
use eddy_common::metrics::{OperatorMetrics, TaskMetrics};
use eddy_common::state::{OperatorState, SnapshotRequest, StateKind};
use eddy_common::{EddyError, Result};
use eddy_operators::Operator;
use eddy_operators::partition::KeyScope;
use eddy_planner::plan::OperatorSpec;

use crate::state_dir::TaskStateDir;

/// Operators of one subtask, in order, with their counters.
pub struct OperatorChain {
    operators: Vec<(Box<dyn Operator>, Arc<OperatorMetrics>)>,
}

impl OperatorChain {
    /// Builds the operators of `specs`, registering their counters under `prefix` and
    /// their position in the chain; their keyed state goes where `state` says.
    pub fn build(
        specs: &[OperatorSpec],
        prefix: &str,
        metrics: &TaskMetrics,
        max_parallelism: usize,
        state: &TaskStateDir,
    ) -> Result<Self> {
        let stateful = specs.iter().filter(|spec| spec.is_stateful()).count();
        let operators = specs
            .iter()
            .enumerate()
            .map(|(i, spec)| {
                let m = metrics.operator(&format!("{prefix}/{i}:{}", short(&spec.description)));
                let context = state.operator(i, stateful);
                Ok((spec.instantiate(m.clone(), max_parallelism, &context)?, m))
            })
            .collect::<Result<_>>()?;
        Ok(OperatorChain { operators })
    }

    /// Runs a chunk through every operator; returns what the last one emits.
    pub fn process(&mut self, chunk: Chunk) -> Result<Vec<Chunk>> {
        self.process_input(0, chunk)
    }

    /// Runs a chunk from input `input` of the task (see [`Operator::process_input`])
    /// through every operator; returns what the last one emits.
    pub fn process_input(&mut self, input: usize, chunk: Chunk) -> Result<Vec<Chunk>> {
        let mut current = vec![chunk];
        for (position, (operator, metrics)) in self.operators.iter_mut().enumerate() {
            let mut next = Vec::new();
            for chunk in current {
                OperatorMetrics::add(&metrics.records_in, chunk.num_rows() as u64);
                match position {
                    0 => operator.process_input(input, chunk, &mut next)?,
                    _ => operator.process(chunk, &mut next)?,
                }
            }
            OperatorMetrics::add(
                &metrics.records_out,
                next.iter().map(|c| c.num_rows() as u64).sum(),
            );
            current = next;
        }
        Ok(current)
    }

    /// Every operator's state for the checkpoint `request` describes, in chain order.
    pub fn snapshot(&mut self, request: &SnapshotRequest) -> Result<Vec<OperatorState>> {
        let states = self
            .operators
            .iter_mut()
            .map(|(op, _)| op.snapshot(request))
            .collect::<Result<Vec<_>>>()?;
        // Each operator's state size, for its metrics.
        for ((operator, metrics), state) in self.operators.iter().zip(&states) {
            let size = full_size(operator.as_ref(), state);
            metrics
                .state_bytes
                .store(size, std::sync::atomic::Ordering::Relaxed);
        }
        Ok(states)
    }

    /// Roughly the bytes of a full snapshot of every operator now, given the snapshot
    /// `states` just taken: a full state's own size, or the operator's estimate.
    pub fn full_snapshot_estimate(&self, states: &[OperatorState]) -> u64 {
        self.operators
            .iter()
            .zip(states)
            .map(|((operator, _), state)| full_size(operator.as_ref(), state))
            .sum()
    }

    /// Restores every operator from the snapshots of the previous run: `states[i]` holds
    /// operator `i`'s states from each previous subtask (a full one, then the changes
    /// taken after it).
    pub fn restore(&mut self, states: &[Vec<Bytes>], scope: &KeyScope) -> Result<()> {
        if states.len() != self.operators.len() {
            return Err(EddyError::Snapshot(format!(
                "the checkpoint holds {} operators for this task but the plan has {}: the job changed",
                states.len(),
                self.operators.len()
            )));
        }
        for ((operator, _), snapshots) in self.operators.iter_mut().zip(states) {
            let refs: Vec<&[u8]> = snapshots.iter().map(|s| s.as_ref()).collect();
            operator.restore(&refs, scope)?;
        }
        Ok(())
    }

    /// The state restored is exactly this subtask's snapshot of `checkpoint`: later
    /// snapshots may hold only the changes since it.
    pub fn restored_from(&mut self, checkpoint: u64) {
        for (operator, _) in &mut self.operators {
            operator.restored_from(checkpoint);
        }
    }

    /// Passes a watermark down the chain: each operator first sees the chunks the
    /// operators before it emitted for this watermark, then the watermark, held back by
    /// the operators before it that emit older rows ([`Operator::watermark_delay`]).
    /// Returns what the chain emitted and the watermark to pass on.
    pub fn on_watermark(&mut self, watermark: Timestamp) -> Result<(Vec<Chunk>, Timestamp)> {
        let mut current = watermark;
        let chunks = self.on_time(|operator, out| {
            operator.on_watermark(current, out)?;
            // The end of the input stays the end.
            if current != Timestamp::MAX {
                current = current.saturating_sub(operator.watermark_delay());
            }
            Ok(())
        })?;
        Ok((chunks, current))
    }

    /// Whether an operator of the chain has output due for a watermark it saw
    /// ([`Operator::has_due_output`]).
    pub fn has_due_output(&self) -> bool {
        self.operators
            .iter()
            .any(|(operator, _)| operator.has_due_output())
    }

    /// The earliest wall-clock time an operator of the chain wants to be woken at.
    pub fn processing_timer(&self) -> Option<Timestamp> {
        self.operators
            .iter()
            .filter_map(|(operator, _)| operator.processing_timer())
            .min()
    }

    /// Tells the chain the wall clock reached `now`, as [`OperatorChain::on_watermark`]
    /// passes a watermark.
    pub fn on_processing_time(&mut self, now: Timestamp) -> Result<Vec<Chunk>> {
        self.on_time(|operator, out| operator.on_processing_time(now, out))
    }

    fn on_time(
        &mut self,
        mut tell: impl FnMut(&mut dyn Operator, &mut Vec<Chunk>) -> Result<()>,
    ) -> Result<Vec<Chunk>> {
        let mut emitted: Vec<Chunk> = Vec::new();
        for (operator, metrics) in &mut self.operators {
            let mut next = Vec::new();
            for chunk in emitted {
                OperatorMetrics::add(&metrics.records_in, chunk.num_rows() as u64);
                operator.process(chunk, &mut next)?;
            }
            tell(operator.as_mut(), &mut next)?;
            OperatorMetrics::add(
                &metrics.records_out,
                next.iter().map(|c| c.num_rows() as u64).sum(),
            );
            emitted = next;
        }
        Ok(emitted)
    }
}

/// The operator's name without its arguments, for metric names.
fn short(description: &str) -> &str {
    description.split('(').next().unwrap_or(description)
}

/// Roughly the bytes of a full snapshot of `operator`, given the snapshot `state` it just
/// took: a full state's own size, or the operator's estimate.
fn full_size(operator: &dyn Operator, state: &OperatorState) -> u64 {
    match state.kind {
        StateKind::Full => {
            state.bytes.len() as u64 + state.files.iter().map(|f| f.size).sum::<u64>()
        }
        StateKind::Changes => operator.full_snapshot_estimate(),
    }
}
