//! Aggregations: unbounded `GROUP BY` (a retract or upsert changelog) and window
//! aggregates (append-only, emitted when the watermark passes a window's end).

pub mod accumulator;
mod group;
pub(crate) mod over;
mod window;

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, BooleanArray};
use arrow::datatypes::DataType;
use arrow::record_batch::RecordBatch;
use datafusion_physical_expr::PhysicalExpr;

pub use accumulator::{AggregateKind, GroupAccumulator, UserAggregate};
pub use group::GroupAggregate;
pub use over::{OverAggregate, OverFrame, OverSpec};
pub use window::{OutputColumn, WindowAggregate, WindowAggregateSpec, WindowColumns};

use super::evaluate;
use super::group_keys::Slots;
use eddy_common::chunk::{Chunk, Op};
use eddy_common::state::{StateReader, StateWriter};
use eddy_common::{EddyError, Result};

/// One aggregate function call of a `GROUP BY`.
#[derive(Debug, Clone)]
pub struct AggregateCall {
    /// Which function.
    pub kind: AggregateKind,
    /// Its argument.
    pub arg: Arc<dyn PhysicalExpr>,
    /// `FILTER (WHERE ...)`, if given.
    pub filter: Option<Arc<dyn PhysicalExpr>>,
    /// The argument's type.
    pub input_type: DataType,
    /// The result's type.
    pub output_type: DataType,
    /// The input carries inserts only (no retractions), so less state is needed.
    pub append_only: bool,
}

impl AggregateCall {
    fn accumulator(&self) -> Result<Box<dyn GroupAccumulator>> {
        self.kind
            .accumulator(&self.input_type, &self.output_type, self.append_only)
    }
}

/// The accumulators of all calls, kept in step.
#[derive(Debug)]
struct Accumulators {
    calls: Vec<AggregateCall>,
    states: Vec<Box<dyn GroupAccumulator>>,
}

impl Accumulators {
    fn new(calls: Vec<AggregateCall>) -> Result<Self> {
        let states = calls
            .iter()
            .map(AggregateCall::accumulator)
            .collect::<Result<_>>()?;
        Ok(Accumulators { calls, states })
    }

    fn resize(&mut self, groups: usize) {
        for s in &mut self.states {
            s.resize(groups);
        }
    }

    /// Applies the rows of `rows` to their groups with their signs.
    fn update(&mut self, rows: &RecordBatch, groups: &[u32], signs: &[i8]) -> Result<()> {
        for (call, state) in self.calls.iter().zip(&mut self.states) {
            let values = evaluate(&call.arg, rows)?;
            match &call.filter {
                None => state.update(groups, signs, &values)?,
                Some(filter) => {
                    let keep = evaluate(filter, rows)?;
                    let keep = keep
                        .as_any()
                        .downcast_ref::<BooleanArray>()
                        .expect("boolean filter");
                    let filtered: Vec<i8> = signs
                        .iter()
                        .enumerate()
                        .map(|(i, s)| {
                            if keep.is_valid(i) && keep.value(i) {
                                *s
                            } else {
                                0
                            }
                        })
                        .collect();
                    state.update(groups, &filtered, &values)?;
                }
            }
        }
        Ok(())
    }

    fn evaluate(&self, groups: &[u32]) -> Result<Vec<ArrayRef>> {
        self.states.iter().map(|s| s.evaluate(groups)).collect()
    }

    fn merge(&mut self, into: u32, from: u32) {
        for s in &mut self.states {
            s.merge(into, from);
        }
    }

    fn reset(&mut self, group: u32) {
        for s in &mut self.states {
            s.reset(group);
        }
    }

    fn save(&self, group: u32, out: &mut StateWriter) {
        for s in &self.states {
            s.save(group, out);
        }
    }

    fn load(&mut self, group: u32, input: &mut StateReader<'_>) -> Result<()> {
        for s in &mut self.states {
            s.load(group, input)?;
        }
        Ok(())
    }
}

/// Version of the aggregate snapshot format: 1 wrote fixed-width integers, 2 writes
/// varints after the version, 3 starts a `GROUP BY`'s snapshot with the keys it removed
/// (a snapshot of changes since an earlier one), 4 says after them whether each group
/// carries the time it was last written (a `GROUP BY` with a state TTL), 5 starts a
/// `GROUP BY`'s snapshot with its layout: its groups inline, or the runs of its LSM store;
/// 6 follows a window aggregate's watermark with the windows its LSM store holds keys of
/// and its layout.
pub(crate) const SNAPSHOT_VERSION: u64 = 6;

/// A writer for an aggregate snapshot, its header written.
fn snapshot_writer(capacity: usize) -> StateWriter {
    let mut out = StateWriter::with_capacity(capacity);
    out.u64(SNAPSHOT_VERSION).compact();
    out
}

/// Reads a snapshot's header; returns its format version and its reader positioned after
/// the header.
fn open_snapshot<'a>(bytes: &'a [u8], what: &'a str) -> Result<(u64, StateReader<'a>)> {
    let mut reader = StateReader::new(bytes, what);
    let version = reader.u64()?;
    match version {
        1 => {}
        2..=6 => {
            reader.compact();
        }
        _ => {
            return Err(EddyError::Snapshot(format!(
                "snapshot of {what} has format version {version}; this Eddy reads versions 1 \
                 to {SNAPSHOT_VERSION}"
            )));
        }
    }
    Ok((version, reader))
}

/// +1 for rows that add (`+I`, `+U`), -1 for rows that retract (`-U`, `-D`).
fn signs_of(chunk: &Chunk) -> Vec<i8> {
    (0..chunk.num_rows())
        .map(|i| if chunk.op(i).is_accumulate() { 1 } else { -1 })
        .collect()
}

/// `(op, row)` pairs for building output chunks.
type Emitted = Vec<(Op, (usize, usize))>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshots_of_every_version_open_and_others_are_refused() {
        let mut v1 = StateWriter::new();
        v1.u64(1).u64(300).i64(-2);
        let mut v2 = StateWriter::new();
        v2.u64(2).compact().u64(300).i64(-2);
        let mut v3 = StateWriter::new();
        v3.u64(3).compact().u64(300).i64(-2);
        let (v1, v2, v3) = (v1.finish(), v2.finish(), v3.finish());
        assert_eq!(v3.len(), 8 + 2 + 1, "varints after the version");
        for (version, bytes) in [(1, v1), (2, v2), (3, v3)] {
            let (read, mut input) = open_snapshot(&bytes, "test").unwrap();
            assert_eq!(read, version);
            assert_eq!(input.u64().unwrap(), 300);
            assert_eq!(input.i64().unwrap(), -2);
            assert!(input.is_empty());
        }
        let mut v7 = StateWriter::new();
        v7.u64(7);
        let error = open_snapshot(&v7.finish(), "test").unwrap_err().to_string();
        assert!(error.contains("format version 7"), "{error}");
    }
}
