//! Regular (unbounded) equi-joins of two changelog streams, as Flink's streaming join, and
//! interval joins; window joins are in [`window`], lookup joins in [`lookup`].
//!
//! Both inputs arrive hash-partitioned by the join key. Each side keeps every row it has
//! seen (minus those retracted) by key. A row from one side is joined with the other
//! side's rows of its key, the pairs are filtered by the join's remaining condition, and
//! each pair is emitted with the row's change: an insert adds joined rows, a retraction
//! (`-U`, `-D`) takes back the joined rows its insert produced. The output is
//! append-only when both inputs are.
//!
//! Snapshots can be incremental: a snapshot of changes holds, per side, the rows removed
//! and the rows added since the completed snapshot it extends.
//!
//! An interval join (the condition bounds `left.t - right.t` between two constants, `t`
//! the inputs' event-time attributes, both inputs append-only) holds a row only while a
//! row of the other side can still join it: the watermark removes it, as Flink's interval
//! join does (a left row once `left.t - lower` has passed the watermark, a right row once
//! `right.t + upper` has), and a row that arrives already past that is joined but not held.

mod kind;
mod lookup;
mod regular;
mod side;
pub(crate) mod temporal;
pub(crate) mod window;

use std::sync::Arc;

use arrow::datatypes::{DataType, SchemaRef};
use datafusion_physical_expr::PhysicalExpr;

pub use self::kind::{Filtering, JoinKind};
pub use self::lookup::{Lookup, LookupCache, LookupJoin, LookupJoinSpec, TableStep};
pub(crate) use self::regular::SNAPSHOT_VERSION;
pub use self::regular::StreamingJoin;
pub use self::temporal::{TemporalJoin, TemporalJoinSpec};
pub use self::window::{WindowJoin, WindowJoinSpec};

/// What a regular or interval join is, as planned.
#[derive(Debug, Clone)]
pub struct JoinSpec {
    /// The key expressions over the left input's rows.
    pub left_keys: Vec<Arc<dyn PhysicalExpr>>,
    /// The key expressions over the right input's rows, pairwise equal to the left's.
    pub right_keys: Vec<Arc<dyn PhysicalExpr>>,
    /// The keys' types (the same on both sides).
    pub key_types: Vec<DataType>,
    /// The left input's rows.
    pub left_schema: SchemaRef,
    /// The right input's rows.
    pub right_schema: SchemaRef,
    /// The rest of the join condition, over the joined rows.
    pub filter: Option<Arc<dyn PhysicalExpr>>,
    /// NULL keys match each other (`IS NOT DISTINCT FROM`); otherwise they match nothing.
    pub nulls_equal: bool,
    /// The rows emitted: the left input's columns, then (except in a semi or anti join)
    /// the right's.
    pub schema: SchemaRef,
    /// Which rows are emitted.
    pub kind: JoinKind,
    /// How long held rows live.
    pub retention: Retention,
}

/// How long a join holds its rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retention {
    /// Until retracted or, per input (left, right), this many milliseconds after the row
    /// was last written (added, or its match count changed) by the wall clock; `None`:
    /// for good.
    StateTtl([Option<i64>; 2]),
    /// An interval join's: while a row of the other side can still join it.
    Interval(IntervalBounds),
}

impl Retention {
    /// The state TTL per input (none for an interval join).
    pub fn state_ttl(&self) -> [Option<i64>; 2] {
        match self {
            Retention::StateTtl(ttl) => *ttl,
            Retention::Interval(_) => [None, None],
        }
    }

    /// An interval join's bounds.
    pub fn interval(&self) -> Option<IntervalBounds> {
        match self {
            Retention::StateTtl(_) => None,
            Retention::Interval(bounds) => Some(*bounds),
        }
    }
}

/// `right.t + lower <= left.t <= right.t + upper`, on the inputs' event-time attributes
/// (milliseconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IntervalBounds {
    /// The left input's event-time column.
    pub left_time: usize,
    /// The right input's event-time column.
    pub right_time: usize,
    /// The least `left.t - right.t` that joins.
    pub lower: i64,
    /// The greatest `left.t - right.t` that joins.
    pub upper: i64,
}

impl IntervalBounds {
    /// The event-time column of input `input`'s rows.
    fn time_column(&self, input: usize) -> usize {
        match input {
            0 => self.left_time,
            _ => self.right_time,
        }
    }

    /// How far past a row's time of input `input` the watermark may go before no row of
    /// the other side can join it any more (`-lower` for a left row, `upper` for a right).
    fn reach(&self, input: usize) -> i64 {
        match input {
            0 => -self.lower,
            _ => self.upper,
        }
    }
}

/// A left row followed by a right row.
pub(crate) fn pair_schema(left: &SchemaRef, right: &SchemaRef) -> SchemaRef {
    let fields: Vec<_> = left
        .fields()
        .iter()
        .chain(right.fields().iter())
        .map(|f| f.as_ref().clone().with_nullable(true))
        .collect();
    Arc::new(arrow::datatypes::Schema::new(fields))
}
