//! Streaming operators. An operator takes chunks and watermarks from its input and
//! emits chunks; operators in one task are chained, each feeding the next directly.

pub mod aggregate;
pub mod calc;
mod cold_slots;
pub mod correlate;
mod group_keys;
pub mod join;
#[cfg(test)]
mod lsm_testing;
pub mod normalize;
pub mod partition;
pub mod rank;
mod spilled_windows;
pub mod state_context;
mod stored_runs;
mod stored_timers;
pub mod ttl;
pub mod watermark;
pub mod window_assign;

use std::sync::Arc;

use arrow::array::ArrayRef;
use arrow::record_batch::RecordBatch;
use datafusion_common::DataFusionError;
use datafusion_physical_expr::PhysicalExpr;
use eddy_common::chunk::Chunk;
use eddy_common::event::Timestamp;
use eddy_common::state::{OperatorState, SnapshotRequest, StateReader, StateWriter};
use eddy_common::{EddyError, Result};

use crate::partition::KeyScope;

/// A streaming operator of one subtask.
pub trait Operator: Send {
    /// Processes a chunk of changes, appending what it emits to `out`.
    fn process(&mut self, chunk: Chunk, out: &mut Vec<Chunk>) -> Result<()>;

    /// Processes a chunk that came from input `input` of the task (the index of its
    /// sending vertex among the task's inputs). Only a task's first operator is told
    /// where rows came from; an operator with one input ignores it.
    fn process_input(&mut self, input: usize, chunk: Chunk, out: &mut Vec<Chunk>) -> Result<()> {
        let _ = input;
        self.process(chunk, out)
    }

    /// Event time has advanced to `watermark`: emit what it completes (e.g. windows).
    /// The watermark itself is forwarded by the caller after `out`.
    fn on_watermark(&mut self, watermark: Timestamp, out: &mut Vec<Chunk>) -> Result<()> {
        let _ = (watermark, out);
        Ok(())
    }

    /// Whether output that a watermark already passed is still to come: an operator that
    /// reads back a window larger than memory emits it in parts, and the task passes the
    /// watermark again (after sending each part) until this is false.
    fn has_due_output(&self) -> bool {
        false
    }

    /// How far behind the watermark it has seen the rows the operator emits may be (an
    /// interval join's rows: a late partner joins a row the watermark has passed). The
    /// watermark passed on after it is held back by as much, so that its rows are not late
    /// downstream, as Flink delays an interval join's output watermark.
    fn watermark_delay(&self) -> i64 {
        0
    }

    /// The wall-clock time (ms since the epoch) at which the operator next wants
    /// [`Operator::on_processing_time`], if any (a processing-time window's end).
    fn processing_timer(&self) -> Option<Timestamp> {
        None
    }

    /// The wall clock reached `now`: emit what it completes (processing-time windows).
    fn on_processing_time(&mut self, now: Timestamp, out: &mut Vec<Chunk>) -> Result<()> {
        let _ = (now, out);
        Ok(())
    }

    /// The operator's state for a checkpoint (empty for a stateless operator): all of it,
    /// or, when `request` asks and the operator can, the changes since the snapshot of
    /// `request.completed`. Called between chunks, when a barrier has been aligned.
    fn snapshot(&mut self, request: &SnapshotRequest) -> Result<OperatorState> {
        let _ = request;
        Ok(OperatorState::full(Vec::new()))
    }

    /// Roughly the bytes a full snapshot of the state would take now. Asked after the
    /// operator wrote a snapshot of changes, to judge when the chain of snapshots a
    /// restore reads has grown past the state itself.
    fn full_snapshot_estimate(&self) -> u64 {
        0
    }

    /// Restores state from the snapshots of every subtask of the previous run (several
    /// when the parallelism changed), keeping what `scope` owns. Each subtask's snapshots
    /// come in the order they were taken: a full one, then the changes taken after it.
    fn restore(&mut self, snapshots: &[&[u8]], scope: &KeyScope) -> Result<()> {
        let _ = (snapshots, scope);
        Ok(())
    }

    /// The state just restored is exactly this subtask's snapshot of `checkpoint` (same
    /// parallelism, the job's own checkpoint): a later snapshot may hold only the changes
    /// since it.
    fn restored_from(&mut self, checkpoint: u64) {
        let _ = checkpoint;
    }
}

/// An encoder of whole rows of `schema` (every column, in order) into the row format state
/// holds rows in.
pub(crate) fn row_codec(schema: &arrow::datatypes::SchemaRef) -> Result<arrow::row::RowConverter> {
    let fields = schema
        .fields()
        .iter()
        .map(|f| arrow::row::SortField::new(f.data_type().clone()))
        .collect();
    Ok(arrow::row::RowConverter::new(fields)?)
}

/// An encoder of join or grouping keys of `types` into the row format state keys are.
pub(crate) fn key_codec(types: &[arrow::datatypes::DataType]) -> Result<arrow::row::RowConverter> {
    let fields = types
        .iter()
        .map(|t| arrow::row::SortField::new(t.clone()))
        .collect();
    Ok(arrow::row::RowConverter::new(fields)?)
}

/// A time column (a timestamp of any unit, or a number of milliseconds) as milliseconds
/// since the epoch.
pub(crate) fn epoch_millis(times: &dyn arrow::array::Array) -> Result<arrow::array::Int64Array> {
    use arrow::datatypes::{DataType, TimeUnit};
    let times = arrow::compute::cast(times, &DataType::Timestamp(TimeUnit::Millisecond, None))?;
    let times = arrow::compute::cast(&times, &DataType::Int64)?;
    Ok(times
        .as_any()
        .downcast_ref::<arrow::array::Int64Array>()
        .expect("cast to Int64")
        .clone())
}

pub use eddy_common::event::wall_clock;

/// A writer for a snapshot in format `version` (a single-version format), its header
/// written.
pub(crate) fn versioned_snapshot(version: u64) -> StateWriter {
    let mut out = StateWriter::new();
    out.u64(version).compact();
    out
}

/// Reads the header of a snapshot of `what` written by [`versioned_snapshot`] in any
/// format version from 1 to `newest`; returns the version and the reader after it. A
/// snapshot of another version is refused.
pub(crate) fn open_snapshot_versions<'a>(
    bytes: &'a [u8],
    what: &'a str,
    newest: u64,
) -> Result<(u64, StateReader<'a>)> {
    let mut input = StateReader::new(bytes, what);
    let version = input.u64()?;
    if !(1..=newest).contains(&version) {
        return Err(EddyError::Snapshot(format!(
            "snapshot of {what} has format version {version}; this Eddy reads versions 1 to \
             {newest}"
        )));
    }
    input.compact();
    Ok((version, input))
}

/// Reads `count` rows written as (key group, row encoded by `codec`) pairs, keeping those
/// `scope` owns, as columns of `schema`; `None` when it owns none.
pub(crate) fn read_owned_rows(
    input: &mut eddy_common::state::StateReader<'_>,
    codec: &arrow::row::RowConverter,
    schema: &arrow::datatypes::SchemaRef,
    scope: &KeyScope,
) -> Result<Option<arrow::record_batch::RecordBatch>> {
    let parser = codec.parser();
    let mut rows = Vec::new();
    for _ in 0..input.count(2)? {
        let group = input.u64()? as usize;
        let row = input.bytes()?;
        if scope.owns(group) {
            rows.push(parser.parse(row));
        }
    }
    if rows.is_empty() {
        return Ok(None);
    }
    let columns = codec.convert_rows(rows)?;
    Ok(Some(arrow::record_batch::RecordBatch::try_new(
        schema.clone(),
        columns,
    )?))
}

/// A predicate's result as a filter mask: true where it is true, false where it is false
/// or NULL (as SQL filters).
pub(crate) fn true_only(mask: &ArrayRef) -> Result<arrow::array::BooleanArray> {
    use arrow::array::{Array, AsArray};
    let mask = mask.as_boolean_opt().ok_or_else(|| {
        EddyError::Internal(format!(
            "a condition gave {}, not BOOLEAN",
            mask.data_type()
        ))
    })?;
    Ok(match mask.null_count() {
        0 => mask.clone(),
        _ => arrow::compute::prep_null_mask_filter(mask),
    })
}

/// The format version of each operator's snapshots in this build, by operator.
pub fn state_formats() -> Vec<(&'static str, u64)> {
    vec![
        ("aggregate", aggregate::SNAPSHOT_VERSION),
        ("over-aggregate", aggregate::over::SNAPSHOT_VERSION),
        ("changelog-normalize", normalize::SNAPSHOT_VERSION),
        ("top-n", rank::SNAPSHOT_VERSION),
        ("join", join::SNAPSHOT_VERSION),
        ("temporal-join", join::temporal::SNAPSHOT_VERSION),
        ("window-join", join::window::SNAPSHOT_VERSION),
    ]
}

/// Evaluates a physical expression over a batch into an array.
pub fn evaluate(expr: &Arc<dyn PhysicalExpr>, batch: &RecordBatch) -> Result<ArrayRef> {
    expr.evaluate(batch)
        .and_then(|value| value.into_array(batch.num_rows()))
        .or_eddy()
}

/// DataFusion's results as the engine's, its error kept whole. (Both error types live in
/// other crates, so `?` cannot convert one into the other.)
pub trait OrEddy<T> {
    /// The result, with a DataFusion error wrapped into [`EddyError::DataFusion`].
    fn or_eddy(self) -> Result<T>;
}

impl<T> OrEddy<T> for std::result::Result<T, DataFusionError> {
    fn or_eddy(self) -> Result<T> {
        self.map_err(|error| EddyError::DataFusion(Box::new(error)))
    }
}
