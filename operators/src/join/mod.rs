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

mod lookup;
mod side;
pub(crate) mod temporal;
pub(crate) mod window;

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, UInt32Array, new_null_array};
use arrow::buffer::NullBuffer;
use arrow::compute::take_record_batch;
use arrow::datatypes::{DataType, SchemaRef};
use arrow::record_batch::RecordBatch;
use arrow::row::RowConverter;
use datafusion_physical_expr::PhysicalExpr;
use eddy_common::chunk::{Chunk, Op};
use eddy_common::state::{Epochs, OperatorState, SnapshotRequest, StateReader, StateWriter};
use eddy_common::{EddyError, Result};

pub use self::lookup::{Lookup, LookupCache, LookupJoin, LookupJoinSpec, TableStep};
use self::side::{JoinSide, RowExtras, Unmatched};
pub use self::temporal::{TemporalJoin, TemporalJoinSpec};
pub use self::window::{JoinKind, WindowJoin, WindowJoinSpec};

use crate::partition::{KeyScope, key_groups};
use crate::{Operator, evaluate};

/// The join's snapshot format: 1 held each side's keys and rows; 2 puts the rows removed
/// before them (a snapshot of changes since an earlier one); 3 gives each row of an outer
/// join's preserved side its match count; 4 says after the version which sides' rows carry
/// the time they were written (bit 0 the left, bit 1 the right: a side with a state TTL).
pub(crate) const SNAPSHOT_VERSION: u64 = 4;

/// What a join is, as planned.
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
    /// The joined rows: the left input's columns, then the right's.
    pub schema: SchemaRef,
    /// An interval join's bounds: its rows expire with the watermark.
    pub interval: Option<IntervalBounds>,
    /// Which inputs an outer join preserves (`[true, false]`: a LEFT JOIN): their rows
    /// that join nothing are emitted padded with NULLs.
    pub outer: [bool; 2],
    /// A semi or anti join (`outer` is then `[true, false]`: left rows count their
    /// matches): only left rows are emitted, those with a match or those without.
    pub filtering: Option<Filtering>,
    /// Per input (left, right): milliseconds a held row lives after it was written
    /// (added, or its match count changed), by the wall clock; `None`: for good. Not for
    /// interval joins.
    pub state_ttl: [Option<i64>; 2],
}

/// Which left rows a semi or anti join emits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Filtering {
    /// Those that join at least one right row (`IN`, `EXISTS`), once each: a row comes
    /// with its first match and leaves with its last.
    Semi,
    /// Those that join no right row (`NOT EXISTS`): a row leaves with its first match
    /// and comes back when its last one leaves.
    Anti,
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

/// A streaming inner join of one subtask; input 0 is the left side, input 1 the right.
#[derive(Debug)]
pub struct StreamingJoin {
    sides: [JoinSide; 2],
    epochs: Epochs,
    /// Bytes per held row in the latest snapshot that held any.
    snapshot_bytes_per_row: f64,
    key_codec: RowConverter,
    filter: Option<Arc<dyn PhysicalExpr>>,
    nulls_equal: bool,
    schema: SchemaRef,
    max_parallelism: usize,
    interval: Option<IntervalBounds>,
    /// The watermark, for an interval join.
    watermark: i64,
    outer: [bool; 2],
    filtering: Option<Filtering>,
    /// A left row followed by a right row: the pairs the condition is evaluated on.
    pair_schema: SchemaRef,
    state_ttl: [Option<i64>; 2],
    /// The wall clock, for the state TTL (replaced in tests).
    clock: fn() -> i64,
}

impl StreamingJoin {
    /// A join as `spec` says, its key state split into `max_parallelism` key groups.
    pub fn new(spec: &JoinSpec, max_parallelism: usize) -> Result<Self> {
        let key_codec = crate::key_codec(&spec.key_types)?;
        Ok(StreamingJoin {
            sides: [
                JoinSide::new(spec.left_keys.clone(), &spec.left_schema)?,
                JoinSide::new(spec.right_keys.clone(), &spec.right_schema)?,
            ],
            epochs: Epochs::default(),
            snapshot_bytes_per_row: 0.0,
            key_codec,
            filter: spec.filter.clone(),
            nulls_equal: spec.nulls_equal,
            schema: spec.schema.clone(),
            max_parallelism,
            interval: spec.interval,
            watermark: i64::MIN,
            outer: match spec.filtering {
                Some(_) => [true, false],
                None => spec.outer,
            },
            filtering: spec.filtering,
            pair_schema: match spec.filtering {
                Some(_) => pair_schema(&spec.left_schema, &spec.right_schema),
                None => spec.schema.clone(),
            },
            state_ttl: match spec.interval {
                None => spec.state_ttl,
                Some(_) => [None, None],
            },
            clock: crate::wall_clock,
        })
    }

    /// Rows held on each side.
    #[cfg(test)]
    fn state_rows(&self) -> (usize, usize) {
        (self.sides[0].len(), self.sides[1].len())
    }

    /// Joins `chunk`, from input `input`, with the other side's rows; then adds its rows
    /// to (or retracts them from) its own side. In an outer join, a preserved side's row
    /// that joins nothing is emitted padded with NULLs, and that padded row is taken back
    /// when its first partner arrives (and emitted again when its last one leaves).
    fn join(&mut self, input: usize, chunk: Chunk, out: &mut Vec<Chunk>) -> Result<()> {
        if input > 1 {
            return Err(EddyError::Internal(format!(
                "a join has two inputs, but rows came from input {input}"
            )));
        }
        let (this_outer, other_outer) = (self.outer[input], self.outer[1 - input]);
        // With a state TTL: rows written before `expired[side]` are gone, dropped or not.
        let now = self
            .state_ttl
            .iter()
            .any(Option::is_some)
            .then(|| (self.clock)());
        let expired = self.expired_before(now);
        self.expire_through(expired);
        let (this_now, other_expired) = (
            now.filter(|_| self.state_ttl[input].is_some()),
            expired[1 - input],
        );
        let other_now = now.filter(|_| self.state_ttl[1 - input].is_some());
        let [left, right] = &mut self.sides;
        let (this, other) = match input {
            0 => (left, right),
            _ => (right, left),
        };
        let key_arrays = this
            .keys
            .iter()
            .map(|k| evaluate(k, chunk.rows()))
            .collect::<Result<Vec<_>>>()?;
        // Rows with a NULL key match nothing (unless NULLs are equal here) and are not kept.
        let valid = match self.nulls_equal {
            true => None,
            false => key_arrays.iter().fold(None, |acc, k| {
                NullBuffer::union(acc.as_ref(), k.logical_nulls().as_ref())
            }),
        };
        let is_valid = |i: usize| valid.as_ref().is_none_or(|v| v.is_valid(i));
        let keys = self.key_codec.convert_columns(&key_arrays)?;
        let rows = this.codec.convert_columns(chunk.rows().columns())?;

        // Every pair of a row with a held row of its key, and whether the condition holds.
        let parser = other.codec.parser();
        let mut these: Vec<u32> = Vec::new();
        let mut partners: Vec<u32> = Vec::new();
        let mut others = Vec::new();
        let mut ops: Vec<Op> = Vec::new();
        for i in (0..chunk.num_rows()).filter(|i| is_valid(*i)) {
            let op = chunk.op(i);
            for (id, row) in other.matching(keys.row(i).data()) {
                if other_expired.is_some_and(|bound| other.time_of(id) <= bound) {
                    continue;
                }
                these.push(i as u32);
                partners.push(id);
                others.push(parser.parse(row));
                ops.push(op);
            }
        }
        // The joined pairs, and whether the rest of the condition holds for each.
        let (joined, keep) = match these.is_empty() {
            true => (None, None),
            false => {
                let indices = UInt32Array::from_iter_values(these.iter().copied());
                let this_columns = take_record_batch(chunk.rows(), &indices)?
                    .columns()
                    .to_vec();
                let other_columns = other.codec.convert_rows(others)?;
                let columns = match input {
                    0 => [this_columns, other_columns].concat(),
                    _ => [other_columns, this_columns].concat(),
                };
                let joined = RecordBatch::try_new(self.pair_schema.clone(), columns)?;
                let keep = match &self.filter {
                    None => None,
                    Some(filter) => Some(evaluate(filter, &joined)?.as_boolean().clone()),
                };
                (Some(Chunk::from_ops(joined, ops)), keep)
            }
        };
        let kept = |pair: usize| {
            keep.as_ref()
                .is_none_or(|k| k.is_valid(pair) && k.value(pair))
        };
        if !this_outer
            && !other_outer
            && let Some(joined) = &joined
        {
            let joined = match &keep {
                None => joined.clone(),
                Some(keep) => joined.filter(keep)?,
            };
            if !joined.is_empty() {
                out.push(joined);
            }
        }

        // Row by row, in order: what each row's change does to the padded rows, and the
        // row held or taken back.
        let epoch = self.epochs.current();
        let times = match self.interval {
            Some(interval) => Some((
                crate::epoch_millis(chunk.rows().column(interval.time_column(input)))?,
                interval.reach(input),
            )),
            None => None,
        };
        let deferred_padding = self.interval.is_some();
        let mut emitted: Vec<Emitted> = Vec::new();
        let mut pair = 0;
        for i in 0..chunk.num_rows() {
            let op = chunk.op(i);
            let accumulate = op.is_accumulate();
            let mut joins = 0u32;
            while pair < these.len() && these[pair] as usize == i {
                if kept(pair) {
                    joins += 1;
                    if this_outer || other_outer {
                        let id = partners[pair];
                        let before = other.match_count(id);
                        let after = match accumulate {
                            true => before + 1,
                            false => before.saturating_sub(1),
                        };
                        if other_outer {
                            other.set_match_count(id, after);
                            // A new count is a write: it renews the row's TTL.
                            if let Some(now) = other_now {
                                other.renew(keys.row(i).data(), id, now);
                            }
                        }
                        // A partner's padded row leaves with its first match and comes
                        // back when its last one goes (an interval join pads a row only
                        // when it expires, if it joined nothing).
                        if other_outer && before == 0 && after == 1 && !deferred_padding {
                            emitted.push(Emitted::PartnerPadded(id, Op::Delete));
                        }
                        if self.filtering.is_none() {
                            emitted.push(Emitted::Joined(pair));
                        }
                        if other_outer && before == 1 && after == 0 {
                            emitted.push(Emitted::PartnerPadded(id, Op::Insert));
                        }
                    }
                }
                pair += 1;
            }
            if !is_valid(i) {
                // A NULL key joins nothing: in an outer join its padded row comes and goes.
                if this_outer {
                    emitted.push(Emitted::Padded(i, op));
                }
                continue;
            }
            let (key, row) = (keys.row(i), rows.row(i));
            let semi_left = input == 0 && self.filtering == Some(Filtering::Semi);
            if !accumulate {
                // A retraction of a row this side never held takes nothing back.
                match this.retract(key.data(), row.data(), epoch) {
                    Some(0) if this_outer => emitted.push(Emitted::Padded(i, op)),
                    Some(_) if semi_left => emitted.push(Emitted::Matched(i, op)),
                    _ => {}
                }
                continue;
            }
            if this_outer && joins == 0 && !deferred_padding {
                emitted.push(Emitted::Padded(i, op));
            } else if semi_left {
                emitted.push(Emitted::Matched(i, op));
            }
            match &times {
                None => {
                    let (slot, id) = this.insert(key.data(), row.data(), epoch);
                    if this_outer {
                        this.set_match_count(id, joins);
                    }
                    if let Some(now) = this_now {
                        this.set_time(slot, id, now);
                    }
                }
                Some((times, reach)) => {
                    // A row no future row of the other side can join is not held.
                    if times.is_null(i) {
                        if this_outer && joins == 0 {
                            emitted.push(Emitted::Padded(i, op));
                        }
                        continue;
                    }
                    let time = times.value(i);
                    if time.saturating_add(*reach) > self.watermark {
                        let id = this.insert_expiring(key.data(), row.data(), epoch, time);
                        if this_outer {
                            this.set_match_count(id, joins);
                        }
                    } else if this_outer && joins == 0 {
                        // Too late to be joined later: padded now.
                        emitted.push(Emitted::Padded(i, op));
                    }
                }
            }
        }
        if let Some(filtering) = self.filtering {
            if let Some(chunk) = filtered_output(filtering, &self.schema, &chunk, other, &emitted)?
            {
                out.push(chunk);
            }
        } else if !emitted.is_empty() {
            out.push(outer_output(
                &self.schema,
                input,
                &chunk,
                joined.as_ref(),
                other,
                &emitted,
            )?);
        }
        Ok(())
    }
}

/// One row an outer join emits for a chunk, in order.
#[derive(Debug, Clone, Copy)]
enum Emitted {
    /// The joined pair at this index.
    Joined(usize),
    /// A row of the chunk, padded with NULLs, with this change.
    Padded(usize, Op),
    /// A held row of the other side (its entry), padded with NULLs, with this change.
    PartnerPadded(u32, Op),
    /// A left row of the chunk that joins (a semi join emits it), with this change.
    Matched(usize, Op),
}

/// A left row followed by a right row.
fn pair_schema(left: &SchemaRef, right: &SchemaRef) -> SchemaRef {
    let fields: Vec<_> = left
        .fields()
        .iter()
        .chain(right.fields().iter())
        .map(|f| f.as_ref().clone().with_nullable(true))
        .collect();
    Arc::new(arrow::datatypes::Schema::new(fields))
}

/// The left rows a semi or anti join emits for a chunk, in order: an anti join's are the
/// rows a LEFT JOIN would pad; a semi join's are the chunk's rows that join (`Matched`)
/// and held left rows whose first match comes or last match goes (the opposite of the
/// padded rows a LEFT JOIN emits for them).
fn filtered_output(
    filtering: Filtering,
    schema: &SchemaRef,
    chunk: &Chunk,
    held: &JoinSide,
    emitted: &[Emitted],
) -> Result<Option<Chunk>> {
    let mut rows = Vec::new();
    let mut partners = Vec::new();
    let mut ops = Vec::new();
    for e in emitted {
        match (*e, filtering) {
            (Emitted::Padded(i, op), Filtering::Anti)
            | (Emitted::Matched(i, op), Filtering::Semi) => {
                rows.push(i as u32);
                ops.push(op);
            }
            (Emitted::PartnerPadded(id, op), _) => {
                partners.push(id);
                ops.push(match (filtering, op.is_accumulate()) {
                    (Filtering::Anti, _) => op,
                    (Filtering::Semi, true) => Op::Delete,
                    (Filtering::Semi, false) => Op::Insert,
                });
            }
            _ => {}
        }
    }
    // One chunk's rows are all of one input: its own left rows, or held ones.
    let columns = match (rows.is_empty(), partners.is_empty()) {
        (true, true) => return Ok(None),
        (false, true) => take_record_batch(chunk.rows(), &UInt32Array::from(rows))?
            .columns()
            .to_vec(),
        (true, false) => {
            let parser = held.codec.parser();
            let rows: Vec<_> = partners
                .iter()
                .map(|id| parser.parse(held.entry_row(*id)))
                .collect();
            held.codec.convert_rows(rows)?
        }
        (false, false) => {
            return Err(EddyError::Internal(
                "a semi join emitted rows of both inputs for one chunk".into(),
            ));
        }
    };
    Ok(Some(Chunk::from_ops(
        RecordBatch::try_new(schema.clone(), columns)?,
        ops,
    )))
}

/// The rows an outer join emits for a chunk from input `input`, in the order `emitted`
/// lists them: joined pairs, the chunk's rows padded, the other side's rows padded.
fn outer_output(
    schema: &SchemaRef,
    input: usize,
    chunk: &Chunk,
    joined: Option<&Chunk>,
    other: &JoinSide,
    emitted: &[Emitted],
) -> Result<Chunk> {
    let this_width = chunk.rows().num_columns();
    let width = schema.fields().len();
    let nulls = |fields: std::ops::Range<usize>, n: usize| -> Vec<ArrayRef> {
        fields
            .map(|f| new_null_array(schema.field(f).data_type(), n))
            .collect()
    };
    let (this_fields, other_fields) = match input {
        0 => (0..this_width, this_width..width),
        _ => (width - this_width..width, 0..width - this_width),
    };
    // The chunk's rows padded.
    let padded: Vec<u32> = emitted
        .iter()
        .filter_map(|e| match e {
            Emitted::Padded(i, _) => Some(*i as u32),
            _ => None,
        })
        .collect();
    let mut padded_columns = nulls(0..width, padded.len());
    let taken = take_record_batch(chunk.rows(), &UInt32Array::from(padded.clone()))?;
    for (f, column) in this_fields.clone().zip(taken.columns()) {
        padded_columns[f] = column.clone();
    }
    // The other side's rows padded.
    let partners: Vec<u32> = emitted
        .iter()
        .filter_map(|e| match e {
            Emitted::PartnerPadded(id, _) => Some(*id),
            _ => None,
        })
        .collect();
    let mut partner_columns = nulls(0..width, partners.len());
    if !partners.is_empty() {
        let parser = other.codec.parser();
        let rows: Vec<_> = partners
            .iter()
            .map(|id| parser.parse(other.entry_row(*id)))
            .collect();
        for (f, column) in other_fields.zip(other.codec.convert_rows(rows)?) {
            partner_columns[f] = column;
        }
    }
    let empty = nulls(0..width, 0);
    let joined_columns = joined.map_or(&empty[..], |j| j.rows().columns());
    // Interleave the three in order.
    let (mut next_padded, mut next_partner) = (0, 0);
    let mut order = Vec::with_capacity(emitted.len());
    let mut ops = Vec::with_capacity(emitted.len());
    for e in emitted {
        match *e {
            Emitted::Joined(pair) => {
                order.push((0, pair));
                ops.push(joined.map_or(Op::Insert, |j| j.op(pair)));
            }
            Emitted::Padded(_, op) => {
                order.push((1, next_padded));
                next_padded += 1;
                ops.push(op);
            }
            Emitted::PartnerPadded(_, op) => {
                order.push((2, next_partner));
                next_partner += 1;
                ops.push(op);
            }
            Emitted::Matched(..) => {
                return Err(EddyError::Internal(
                    "an outer join emitted a semi join's row".into(),
                ));
            }
        }
    }
    let columns = (0..width)
        .map(|f| {
            let sources: [&dyn Array; 3] = [
                joined_columns[f].as_ref(),
                padded_columns[f].as_ref(),
                partner_columns[f].as_ref(),
            ];
            Ok(arrow::compute::interleave(&sources, &order)?)
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Chunk::from_ops(
        RecordBatch::try_new(schema.clone(), columns)?,
        ops,
    ))
}

impl StreamingJoin {
    /// The key groups of `keys`.
    fn key_groups_of(&self, keys: &[(u32, &[u8])]) -> Result<Vec<usize>> {
        let parser = self.key_codec.parser();
        let keys: Vec<_> = keys.iter().map(|(_, key)| parser.parse(key)).collect();
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let columns = self.key_codec.convert_rows(keys)?;
        key_groups(&columns, self.max_parallelism)
    }
}

impl StreamingJoin {
    /// Removes the rows the watermark has put out of every other row's reach.
    /// Per side, the time at or before which rows written are expired at `now` (with a
    /// state TTL on that side).
    fn expired_before(&self, now: Option<i64>) -> [Option<i64>; 2] {
        self.state_ttl.map(|ttl| Some(now? - ttl?))
    }

    /// Drops, per side, the rows written at its bound or before.
    fn expire_through(&mut self, bounds: [Option<i64>; 2]) {
        let epoch = self.epochs.current();
        for (side, bound) in self.sides.iter_mut().zip(bounds) {
            if let Some(bound) = bound {
                // Rows that outlive a TTL leave without a padded row, as in Flink.
                side.expire_through(bound, epoch, None);
            }
        }
    }

    /// Drops the rows the watermark has put out of the other side's reach; an outer
    /// join's rows that joined nothing are emitted padded then (as Flink's interval join
    /// does: once, append-only).
    fn expire(&mut self, out: &mut Vec<Chunk>) -> Result<()> {
        let Some(interval) = self.interval else {
            return Ok(());
        };
        let epoch = self.epochs.current();
        for input in 0..2 {
            // A row of time t is held while t + reach > watermark.
            let bound = self.watermark.saturating_sub(interval.reach(input));
            let mut unmatched = Unmatched::default();
            let collect = self.outer[input].then_some(&mut unmatched);
            self.sides[input].expire_through(bound, epoch, collect);
            if !unmatched.is_empty() {
                out.push(self.padded_rows(input, &unmatched)?);
            }
        }
        Ok(())
    }

    /// Held rows of input `input`, padded with NULLs for the other side's columns.
    fn padded_rows(&self, input: usize, rows: &Unmatched) -> Result<Chunk> {
        let side = &self.sides[input];
        let parser = side.codec.parser();
        let own = side
            .codec
            .convert_rows(rows.rows().map(|r| parser.parse(r)))?;
        let n = own.first().map_or(0, |c| c.len());
        let width = self.schema.fields().len();
        let own_start = match input {
            0 => 0,
            _ => width - own.len(),
        };
        let columns: Vec<ArrayRef> = (0..width)
            .map(|f| match f.checked_sub(own_start) {
                Some(i) if i < own.len() => own[i].clone(),
                _ => new_null_array(self.schema.field(f).data_type(), n),
            })
            .collect();
        Ok(Chunk::inserts(RecordBatch::try_new(
            self.schema.clone(),
            columns,
        )?))
    }

    /// Gives restored rows their event times, so that they expire.
    fn time_restored_rows(&mut self) -> Result<()> {
        let Some(interval) = self.interval else {
            return Ok(());
        };
        for (input, side) in self.sides.iter_mut().enumerate() {
            let entries = side.entries();
            for batch in entries.chunks(4096) {
                let parser = side.codec.parser();
                let rows: Vec<_> = batch
                    .iter()
                    .map(|(_, id)| parser.parse(side.entry_row(*id)))
                    .collect();
                let columns = side.codec.convert_rows(rows)?;
                let times = crate::epoch_millis(&columns[interval.time_column(input)])?;
                for ((slot, id), time) in batch.iter().zip(times.iter()) {
                    side.set_time(*slot, *id, time.unwrap_or(i64::MIN));
                }
            }
        }
        Ok(())
    }
}

impl Operator for StreamingJoin {
    fn process(&mut self, chunk: Chunk, out: &mut Vec<Chunk>) -> Result<()> {
        self.join(0, chunk, out)
    }

    fn watermark_delay(&self) -> i64 {
        self.interval
            .map_or(0, |b| b.reach(0).max(b.reach(1)).max(0))
    }

    fn on_watermark(&mut self, watermark: i64, out: &mut Vec<Chunk>) -> Result<()> {
        if self.interval.is_some() && watermark > self.watermark {
            self.watermark = watermark;
            self.expire(out)?;
        }
        Ok(())
    }

    fn process_input(&mut self, input: usize, chunk: Chunk, out: &mut Vec<Chunk>) -> Result<()> {
        self.join(input, chunk, out)
    }

    fn snapshot(&mut self, request: &SnapshotRequest) -> Result<OperatorState> {
        // Expired rows are not written (and a snapshot of changes drops them).
        let timed = self.state_ttl.map(|ttl| ttl.is_some());
        let now = timed.contains(&true).then(|| (self.clock)());
        self.expire_through(self.expired_before(now));
        let scope = self.epochs.close(request);
        let mut out = StateWriter::new();
        out.u64(SNAPSHOT_VERSION).compact();
        out.u64(timed[0] as u64 | (timed[1] as u64) << 1);
        for side in &mut self.sides {
            if let Some(settled) = scope.settled {
                side.forget_removals_through(settled);
            }
        }
        // An outer join's match counts change on old rows too: its snapshots are whole.
        let outer = self.outer.contains(&true);
        let changes_after = scope.changes_after.filter(|_| !outer);
        let mut rows = 0;
        for (input, side) in self.sides.iter().enumerate() {
            let keys: Vec<(u32, &[u8])> = side.keys(changes_after).collect();
            let groups = self.key_groups_of(&keys)?;
            side.save_removals(changes_after, &mut out);
            out.u64(keys.len() as u64);
            for ((slot, _), key_group) in keys.iter().zip(groups) {
                let with = RowExtras {
                    counts: self.outer[input],
                    times: timed[input],
                };
                rows += side.save(*slot, key_group, changes_after, with, &mut out);
            }
        }
        let bytes = out.finish();
        if rows > 0 {
            self.snapshot_bytes_per_row = bytes.len() as f64 / rows as f64;
        }
        Ok(match outer {
            true => OperatorState::full(bytes),
            false => scope.state(bytes),
        })
    }

    fn full_snapshot_estimate(&self) -> u64 {
        let rows: usize = self.sides.iter().map(JoinSide::len).sum();
        (rows as f64 * self.snapshot_bytes_per_row) as u64
    }

    fn restore(&mut self, snapshots: &[&[u8]], scope: &KeyScope) -> Result<()> {
        // Restored rows belong to the snapshot restored from (see `restored_from`).
        let epoch = 0;
        for snapshot in snapshots {
            let mut input = StateReader::new(snapshot, "a join");
            let version = input.u64()?;
            if !(1..=SNAPSHOT_VERSION).contains(&version) {
                return Err(EddyError::Snapshot(format!(
                    "snapshot of a join has format version {version}; this Eddy reads \
                     versions 1 to {SNAPSHOT_VERSION}"
                )));
            }
            input.compact();
            let times = match version {
                4.. => input.u64()?,
                _ => 0,
            };
            // The TTL clock goes on from the rows' write times (from the restore for rows
            // written without a TTL).
            let now = (self.clock)();
            for (index, side) in self.sides.iter_mut().enumerate() {
                if version >= 2 {
                    side.load_removals(&mut input)?;
                }
                let with = RowExtras {
                    counts: version >= 3 && self.outer[index],
                    times: times & (1 << index) != 0,
                };
                let timed = self.state_ttl[index].map(|_| now);
                for _ in 0..input.count(3)? {
                    side.load(&mut input, epoch, with, timed, |key_group| {
                        scope.owns(key_group)
                    })?;
                }
            }
            if !input.is_empty() {
                return Err(EddyError::Snapshot(
                    "corrupt snapshot of a join: bytes left after both sides".into(),
                ));
            }
        }
        self.time_restored_rows()
    }

    fn restored_from(&mut self, checkpoint: u64) {
        self.epochs.restored(checkpoint);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{ArrayRef, Int64Array, StringArray};
    use arrow::datatypes::{Field, Schema};
    use datafusion_expr::Operator as BinaryOp;
    use datafusion_physical_expr::expressions::{BinaryExpr, Column, col};
    use eddy_common::state::StateKind;

    fn schema(names: &[(&str, DataType)]) -> SchemaRef {
        Arc::new(Schema::new(
            names
                .iter()
                .map(|(n, t)| Field::new(*n, t.clone(), true))
                .collect::<Vec<_>>(),
        ))
    }

    /// bids(auction, price) JOIN auctions(id, name) ON auction = id [AND price > 10].
    fn join(filter: bool, nulls_equal: bool) -> StreamingJoin {
        let bids = schema(&[("auction", DataType::Int64), ("price", DataType::Int64)]);
        let auctions = schema(&[("id", DataType::Int64), ("name", DataType::Utf8)]);
        let joined = schema(&[
            ("auction", DataType::Int64),
            ("price", DataType::Int64),
            ("id", DataType::Int64),
            ("name", DataType::Utf8),
        ]);
        let filter: Option<Arc<dyn PhysicalExpr>> = filter.then(|| {
            let literal = datafusion_physical_expr::expressions::lit(10i64);
            Arc::new(BinaryExpr::new(
                col("price", &joined).unwrap(),
                BinaryOp::Gt,
                literal,
            )) as Arc<dyn PhysicalExpr>
        });
        let spec = JoinSpec {
            left_keys: vec![Arc::new(Column::new("auction", 0))],
            right_keys: vec![Arc::new(Column::new("id", 0))],
            key_types: vec![DataType::Int64],
            left_schema: bids,
            right_schema: auctions,
            filter,
            nulls_equal,
            schema: joined,
            interval: None,
            outer: [false, false],
            filtering: None,
            state_ttl: [None, None],
        };
        StreamingJoin::new(&spec, 128).unwrap()
    }

    /// l(k, t) JOIN r(k, t) ON l.k = r.k, an interval join with `l.t - r.t` in [-10 s, 0].
    fn interval_join() -> StreamingJoin {
        let side = schema(&[
            ("k", DataType::Int64),
            (
                "t",
                DataType::Timestamp(arrow::datatypes::TimeUnit::Millisecond, None),
            ),
        ]);
        let joined = Arc::new(arrow::datatypes::Schema::new(
            [side.fields().to_vec(), side.fields().to_vec()].concat(),
        ));
        let spec = JoinSpec {
            left_keys: vec![Arc::new(Column::new("k", 0))],
            right_keys: vec![Arc::new(Column::new("k", 0))],
            key_types: vec![DataType::Int64],
            left_schema: side.clone(),
            right_schema: side,
            filter: None,
            nulls_equal: false,
            schema: joined,
            interval: Some(IntervalBounds {
                left_time: 1,
                right_time: 1,
                lower: -10_000,
                upper: 0,
            }),
            outer: [false, false],
            filtering: None,
            state_ttl: [None, None],
        };
        StreamingJoin::new(&spec, 128).unwrap()
    }

    fn timed(rows: &[(i64, i64)]) -> Chunk {
        let k = Int64Array::from_iter_values(rows.iter().map(|r| r.0));
        let t = arrow::array::TimestampMillisecondArray::from_iter_values(rows.iter().map(|r| r.1));
        let names = [
            ("k", DataType::Int64),
            (
                "t",
                DataType::Timestamp(arrow::datatypes::TimeUnit::Millisecond, None),
            ),
        ];
        chunk(
            &names,
            vec![Arc::new(k), Arc::new(t)],
            &vec![Op::Insert; rows.len()],
        )
    }

    #[test]
    fn an_interval_join_drops_rows_the_watermark_put_out_of_reach() {
        let mut join = interval_join();
        let mut out = Vec::new();
        join.process_input(1, timed(&[(1, 100_000), (2, 120_000)]), &mut out)
            .unwrap();
        join.process_input(0, timed(&[(1, 95_000), (2, 111_000)]), &mut out)
            .unwrap();
        assert_eq!(out.iter().map(Chunk::num_rows).sum::<usize>(), 2);
        assert_eq!(join.state_rows(), (2, 2));
        // A right row at t joins left rows up to t: gone once the watermark passes t (and
        // the rest of its second).
        join.on_watermark(100_998, &mut out).unwrap();
        assert_eq!(join.state_rows(), (2, 2));
        join.on_watermark(100_999, &mut out).unwrap();
        assert_eq!(join.state_rows(), (2, 1));
        // A left row at t joins right rows up to t + 10 s: kept until then.
        join.on_watermark(105_998, &mut out).unwrap();
        assert_eq!(join.state_rows(), (2, 1));
        join.on_watermark(105_999, &mut out).unwrap();
        assert_eq!(join.state_rows(), (1, 1));
        let snapshot = join.snapshot(&SnapshotRequest::full(1)).unwrap().bytes;
        let mut restored = interval_join();
        restored
            .restore(&[&snapshot], &KeyScope::everything())
            .unwrap();
        assert_eq!(restored.state_rows(), (1, 1));
        restored.on_watermark(122_000, &mut out).unwrap();
        assert_eq!(restored.state_rows(), (0, 0), "restored rows expire too");
        // A row already out of reach is joined with what is held but not held itself.
        let mut late = Vec::new();
        restored
            .process_input(1, timed(&[(3, 50_000)]), &mut late)
            .unwrap();
        assert_eq!(restored.state_rows(), (0, 0));
    }

    #[test]
    fn an_outer_interval_join_pads_a_row_once_when_it_expires_unmatched() {
        let mut join = interval_join();
        join.outer = [true, true];
        let keys = |out: &[Chunk]| -> Vec<(Option<i64>, Option<i64>)> {
            let mut pairs = Vec::new();
            for chunk in out {
                assert!(
                    chunk.is_append_only(),
                    "an outer interval join only inserts"
                );
                let rows = chunk.rows();
                let key = |c: usize, i: usize| {
                    let column = rows.column(c).as_primitive::<arrow::datatypes::Int64Type>();
                    column.is_valid(i).then(|| column.value(i))
                };
                pairs.extend((0..rows.num_rows()).map(|i| (key(0, i), key(2, i))));
            }
            pairs
        };
        let mut out = Vec::new();
        join.process_input(1, timed(&[(1, 100_000), (2, 100_000)]), &mut out)
            .unwrap();
        join.process_input(0, timed(&[(1, 95_000), (3, 96_000)]), &mut out)
            .unwrap();
        assert_eq!(keys(&out), [(Some(1), Some(1))], "no padding before expiry");
        // The right rows expire past 100 s: 2 joined nothing; 1 did.
        out.clear();
        join.on_watermark(101_000, &mut out).unwrap();
        assert_eq!(keys(&out), [(None, Some(2))]);
        // The left rows expire past t + 10 s: 3 joined nothing.
        out.clear();
        join.on_watermark(107_000, &mut out).unwrap();
        assert_eq!(keys(&out), [(Some(3), None)]);
        // A row too late to be held, joining nothing, is padded at once.
        out.clear();
        join.process_input(1, timed(&[(4, 50_000)]), &mut out)
            .unwrap();
        assert_eq!(keys(&out), [(None, Some(4))]);
        assert_eq!(join.watermark_delay(), 10_000);
    }

    fn chunk(names: &[(&str, DataType)], columns: Vec<ArrayRef>, ops: &[Op]) -> Chunk {
        let batch = RecordBatch::try_new(schema(names), columns).unwrap();
        Chunk::from_ops(batch, ops.to_vec())
    }

    fn bids(rows: &[(Option<i64>, i64)], ops: &[Op]) -> Chunk {
        let auction = Int64Array::from(rows.iter().map(|r| r.0).collect::<Vec<_>>());
        let price = Int64Array::from_iter_values(rows.iter().map(|r| r.1));
        let names = [("auction", DataType::Int64), ("price", DataType::Int64)];
        chunk(&names, vec![Arc::new(auction), Arc::new(price)], ops)
    }

    fn auctions(rows: &[(i64, &str)], ops: &[Op]) -> Chunk {
        let id = Int64Array::from_iter_values(rows.iter().map(|r| r.0));
        let name = StringArray::from_iter_values(rows.iter().map(|r| r.1));
        let names = [("id", DataType::Int64), ("name", DataType::Utf8)];
        chunk(&names, vec![Arc::new(id), Arc::new(name)], ops)
    }

    /// Every output row as `op auction price id name`.
    fn lines(out: &[Chunk]) -> Vec<String> {
        let mut lines = Vec::new();
        for chunk in out {
            let rows = chunk.rows();
            let int = |c: usize, i: usize| {
                rows.column(c)
                    .as_primitive::<arrow::datatypes::Int64Type>()
                    .value(i)
            };
            let show = |c: usize, i: usize| match rows.column(c).is_null(i) {
                true => "null".to_string(),
                false if c == 3 => rows.column(3).as_string::<i32>().value(i).to_string(),
                false => int(c, i).to_string(),
            };
            for i in 0..chunk.num_rows() {
                lines.push(format!(
                    "{} {} {} {} {}",
                    chunk.op(i).short_name(),
                    show(0, i),
                    show(1, i),
                    show(2, i),
                    show(3, i)
                ));
            }
        }
        lines
    }

    fn run(join: &mut StreamingJoin, input: usize, chunk: Chunk) -> Vec<String> {
        let mut out = Vec::new();
        join.process_input(input, chunk, &mut out).unwrap();
        lines(&out)
    }

    use Op::{Delete, Insert, UpdateAfter, UpdateBefore};

    /// [`join`] without a condition, preserving the inputs `outer` says.
    fn outer_join(outer: [bool; 2]) -> StreamingJoin {
        let mut j = join(false, false);
        j.outer = outer;
        j
    }

    #[test]
    fn a_left_join_pads_until_a_partner_comes_and_after_the_last_leaves() {
        let mut j = outer_join([true, false]);
        assert_eq!(
            run(&mut j, 0, bids(&[(Some(1), 5), (None, 6)], &[Insert; 2])),
            ["+I 1 5 null null", "+I null 6 null null"]
        );
        assert_eq!(
            run(&mut j, 1, auctions(&[(1, "a"), (1, "b")], &[Insert; 2])),
            ["-D 1 5 null null", "+I 1 5 1 a", "+I 1 5 1 b"]
        );
        // An update of one partner in one chunk: the pair goes and comes back, and the
        // padded row never shows while another partner remains.
        assert_eq!(
            run(
                &mut j,
                1,
                auctions(&[(1, "a"), (1, "a2")], &[UpdateBefore, UpdateAfter])
            ),
            ["-U 1 5 1 a", "+U 1 5 1 a2"]
        );
        assert_eq!(
            run(
                &mut j,
                1,
                auctions(&[(1, "b"), (1, "a2")], &[Delete, Delete])
            ),
            ["-D 1 5 1 b", "-D 1 5 1 a2", "+I 1 5 null null"]
        );
        assert_eq!(
            run(&mut j, 0, bids(&[(Some(1), 5)], &[Delete])),
            ["-D 1 5 null null"]
        );
        assert_eq!(j.state_rows(), (0, 0));
    }

    #[test]
    fn a_full_join_pads_both_sides_and_its_counts_survive_a_restore() {
        let mut j = outer_join([true, true]);
        assert_eq!(
            run(&mut j, 1, auctions(&[(2, "x")], &[Insert])),
            ["+I null null 2 x"]
        );
        assert_eq!(
            run(&mut j, 0, bids(&[(Some(2), 1), (Some(3), 4)], &[Insert; 2])),
            ["-D null null 2 x", "+I 2 1 2 x", "+I 3 4 null null"]
        );
        let snapshot = j.snapshot(&SnapshotRequest::full(1)).unwrap();
        assert_eq!(snapshot.kind, eddy_common::state::StateKind::Full);
        let mut restored = outer_join([true, true]);
        restored
            .restore(&[&snapshot.bytes], &KeyScope::everything())
            .unwrap();
        assert_eq!(
            run(&mut restored, 0, bids(&[(Some(2), 1)], &[Delete])),
            ["-D 2 1 2 x", "+I null null 2 x"]
        );
        assert_eq!(
            run(&mut restored, 1, auctions(&[(3, "y")], &[Insert])),
            ["-D 3 4 null null", "+I 3 4 3 y"]
        );
    }

    /// bids semi- or anti-joined with auctions on `auction = id`.
    fn filtering_join(filtering: Filtering) -> StreamingJoin {
        let mut j = join(false, false);
        j.outer = [true, false];
        j.filtering = Some(filtering);
        j.pair_schema = j.schema.clone();
        j.schema = schema(&[("auction", DataType::Int64), ("price", DataType::Int64)]);
        j
    }

    /// Output rows of a semi or anti join as `op auction price`.
    fn left_lines(join: &mut StreamingJoin, input: usize, chunk: Chunk) -> Vec<String> {
        let mut out = Vec::new();
        join.process_input(input, chunk, &mut out).unwrap();
        let mut lines = Vec::new();
        for chunk in &out {
            let show = |c: usize, i: usize| {
                let column = chunk.rows().column(c);
                match column.is_null(i) {
                    true => "null".to_string(),
                    false => column
                        .as_primitive::<arrow::datatypes::Int64Type>()
                        .value(i)
                        .to_string(),
                }
            };
            for i in 0..chunk.num_rows() {
                lines.push(format!(
                    "{} {} {}",
                    chunk.op(i).short_name(),
                    show(0, i),
                    show(1, i)
                ));
            }
        }
        lines
    }

    #[test]
    fn a_semi_join_emits_a_row_with_its_first_match_and_takes_it_back_with_its_last() {
        let mut j = filtering_join(Filtering::Semi);
        assert!(left_lines(&mut j, 0, bids(&[(Some(1), 5), (None, 6)], &[Insert; 2])).is_empty());
        assert_eq!(
            left_lines(&mut j, 1, auctions(&[(1, "a"), (1, "b")], &[Insert; 2])),
            ["+I 1 5"]
        );
        // A row arriving with partners held comes at once, once.
        assert_eq!(
            left_lines(&mut j, 0, bids(&[(Some(1), 7)], &[Insert])),
            ["+I 1 7"]
        );
        assert!(left_lines(&mut j, 1, auctions(&[(1, "a")], &[Delete])).is_empty());
        let snapshot = j.snapshot(&SnapshotRequest::full(1)).unwrap();
        let mut restored = filtering_join(Filtering::Semi);
        restored
            .restore(&[&snapshot.bytes], &KeyScope::everything())
            .unwrap();
        assert_eq!(
            left_lines(&mut restored, 1, auctions(&[(1, "b")], &[Delete])),
            ["-D 1 5", "-D 1 7"]
        );
        assert!(left_lines(&mut restored, 0, bids(&[(Some(1), 5)], &[Delete])).is_empty());
    }

    #[test]
    fn an_anti_join_emits_a_row_until_its_first_match_and_after_its_last() {
        let mut j = filtering_join(Filtering::Anti);
        assert_eq!(
            left_lines(&mut j, 0, bids(&[(Some(1), 5), (None, 6)], &[Insert; 2])),
            ["+I 1 5", "+I null 6"]
        );
        assert_eq!(
            left_lines(&mut j, 1, auctions(&[(1, "a"), (1, "b")], &[Insert; 2])),
            ["-D 1 5"]
        );
        assert!(left_lines(&mut j, 0, bids(&[(Some(1), 7)], &[Insert])).is_empty());
        assert!(left_lines(&mut j, 1, auctions(&[(1, "a")], &[Delete])).is_empty());
        assert_eq!(
            left_lines(&mut j, 1, auctions(&[(1, "b")], &[Delete])),
            ["+I 1 5", "+I 1 7"]
        );
        assert_eq!(
            left_lines(&mut j, 0, bids(&[(Some(1), 5)], &[Delete])),
            ["-D 1 5"]
        );
    }

    #[test]
    fn rows_idle_for_the_ttl_join_nothing_and_keep_their_times_through_a_restore() {
        use crate::ttl::test_clock;
        let ttl_join = || {
            let mut j = join(false, false);
            j.state_ttl = [Some(1000), Some(1000)];
            j.clock = test_clock::now;
            j
        };
        let mut j = ttl_join();
        test_clock::set(0);
        assert!(run(&mut j, 0, bids(&[(Some(1), 5)], &[Insert])).is_empty());
        test_clock::set(600);
        assert!(run(&mut j, 0, bids(&[(Some(1), 6)], &[Insert])).is_empty());
        // The bid of 0 is gone at 1000; the bid of 600 is not.
        test_clock::set(1000);
        assert_eq!(
            run(&mut j, 1, auctions(&[(1, "a")], &[Insert])),
            ["+I 1 6 1 a"]
        );
        let snapshot = j.snapshot(&SnapshotRequest::full(1)).unwrap();
        let mut restored = ttl_join();
        restored
            .restore(&[&snapshot.bytes], &KeyScope::everything())
            .unwrap();
        // At 1600 the bid of 600 is gone there too; the auction of 1000 is not.
        test_clock::set(1600);
        assert!(run(&mut restored, 1, auctions(&[(1, "b")], &[Insert])).is_empty());
        assert_eq!(
            run(&mut restored, 0, bids(&[(Some(1), 7)], &[Insert])),
            ["+I 1 7 1 a", "+I 1 7 1 b"]
        );
        test_clock::set(5000);
        let empty = restored.snapshot(&SnapshotRequest::full(2)).unwrap();
        let mut last = ttl_join();
        last.restore(&[&empty.bytes], &KeyScope::everything())
            .unwrap();
        assert_eq!(last.state_rows(), (0, 0), "expired rows are not written");
    }

    #[test]
    fn each_side_keeps_its_own_ttl() {
        use crate::ttl::test_clock;
        let mut j = join(false, false);
        j.state_ttl = [Some(1000), None];
        j.clock = test_clock::now;
        test_clock::set(0);
        assert!(run(&mut j, 0, bids(&[(Some(1), 5)], &[Insert])).is_empty());
        assert!(run(&mut j, 1, auctions(&[(2, "b")], &[Insert])).is_empty());
        test_clock::set(50_000);
        // The bid expired; the auction, on a side without a TTL, did not.
        assert!(run(&mut j, 1, auctions(&[(1, "a")], &[Insert])).is_empty());
        assert_eq!(
            run(&mut j, 0, bids(&[(Some(2), 6)], &[Insert])),
            ["+I 2 6 2 b"]
        );
        let snapshot = j.snapshot(&SnapshotRequest::full(1)).unwrap();
        let mut restored = join(false, false);
        restored.state_ttl = [Some(1000), None];
        restored.clock = test_clock::now;
        restored
            .restore(&[&snapshot.bytes], &KeyScope::everything())
            .unwrap();
        assert_eq!(restored.state_rows(), (1, 2));
    }

    #[test]
    fn rows_meet_whichever_side_comes_first() {
        let mut j = join(false, false);
        assert!(run(&mut j, 0, bids(&[(Some(1), 5), (Some(2), 7)], &[Insert; 2])).is_empty());
        assert_eq!(
            run(&mut j, 1, auctions(&[(1, "a"), (3, "c")], &[Insert; 2])),
            ["+I 1 5 1 a"]
        );
        assert_eq!(
            run(
                &mut j,
                0,
                bids(&[(Some(1), 6), (Some(3), 8), (Some(4), 9)], &[Insert; 3])
            ),
            ["+I 1 6 1 a", "+I 3 8 3 c"]
        );
        assert_eq!(j.state_rows(), (5, 2));
    }

    #[test]
    fn retractions_take_back_what_their_rows_joined() {
        let mut j = join(false, false);
        run(
            &mut j,
            0,
            bids(&[(Some(1), 5), (Some(1), 5), (Some(1), 6)], &[Insert; 3]),
        );
        assert_eq!(
            run(&mut j, 1, auctions(&[(1, "a")], &[Insert])),
            ["+I 1 5 1 a", "+I 1 5 1 a", "+I 1 6 1 a"]
        );
        // The auction is renamed: every joined row is updated.
        assert_eq!(
            run(
                &mut j,
                1,
                auctions(&[(1, "a"), (1, "b")], &[UpdateBefore, UpdateAfter])
            ),
            [
                "-U 1 5 1 a",
                "-U 1 5 1 a",
                "-U 1 6 1 a",
                "+U 1 5 1 b",
                "+U 1 5 1 b",
                "+U 1 6 1 b"
            ]
        );
        // One of the two equal bids is deleted: one copy goes.
        assert_eq!(
            run(&mut j, 0, bids(&[(Some(1), 5)], &[Delete])),
            ["-D 1 5 1 b"]
        );
        assert_eq!(j.state_rows(), (2, 1));
        // A retraction of a row never held emits nothing and keeps nothing.
        assert!(run(&mut j, 1, auctions(&[(7, "x")], &[Delete])).is_empty());
        assert_eq!(j.state_rows(), (2, 1));
    }

    #[test]
    fn the_rest_of_the_condition_filters_pairs() {
        let mut j = join(true, false);
        run(&mut j, 1, auctions(&[(1, "a")], &[Insert]));
        assert_eq!(
            run(
                &mut j,
                0,
                bids(&[(Some(1), 5), (Some(1), 50)], &[Insert; 2])
            ),
            ["+I 1 50 1 a"]
        );
    }

    #[test]
    fn null_keys_match_only_when_nulls_are_equal() {
        let mut j = join(false, false);
        run(&mut j, 0, bids(&[(None, 5)], &[Insert]));
        assert_eq!(
            j.state_rows(),
            (0, 0),
            "a NULL key can never match: not kept"
        );
        let mut j = join(false, true);
        run(&mut j, 0, bids(&[(None, 5)], &[Insert]));
        assert_eq!(j.state_rows(), (1, 0));
    }

    #[test]
    fn snapshots_restore_only_the_owned_key_groups() {
        let mut j = join(false, false);
        let many: Vec<(Option<i64>, i64)> = (0..200).map(|i| (Some(i), i * 10)).collect();
        run(&mut j, 0, bids(&many, &vec![Insert; many.len()]));
        run(&mut j, 1, auctions(&[(3, "c"), (150, "x")], &[Insert; 2]));
        let snapshot = j.snapshot(&SnapshotRequest::full(1)).unwrap().bytes;

        let mut whole = join(false, false);
        let scope = |subtask| KeyScope {
            subtask,
            parallelism: 2,
            max_parallelism: 128,
        };
        let everything = KeyScope::everything();
        whole.restore(&[&snapshot], &everything).unwrap();
        assert_eq!(whole.state_rows(), (200, 2));
        assert_eq!(
            run(&mut whole, 0, bids(&[(Some(3), 1)], &[Insert])),
            ["+I 3 1 3 c"]
        );

        let (mut a, mut b) = (join(false, false), join(false, false));
        a.restore(&[&snapshot], &scope(0)).unwrap();
        b.restore(&[&snapshot], &scope(1)).unwrap();
        let (a_rows, b_rows) = (a.state_rows(), b.state_rows());
        assert_eq!(a_rows.0 + b_rows.0, 200);
        assert_eq!(a_rows.1 + b_rows.1, 2);
        assert!(
            a_rows.0 > 50 && b_rows.0 > 50,
            "split: {a_rows:?} {b_rows:?}"
        );

        let mut truncated = join(false, false);
        let error = truncated
            .restore(&[&snapshot[..snapshot.len() - 2]], &everything)
            .unwrap_err()
            .to_string();
        assert!(error.contains("corrupt snapshot of a join"), "{error}");
    }

    /// A side's keys, each with its rows (all row-encoded), sorted.
    type Held = Vec<(Vec<u8>, Vec<Vec<u8>>)>;

    /// Each side's rows by key: the state, whatever the slots.
    fn held(j: &StreamingJoin) -> Vec<Held> {
        j.sides
            .iter()
            .map(|side| {
                let mut keys: Vec<_> = side
                    .keys(None)
                    .map(|(_, key)| {
                        (
                            key.to_vec(),
                            side.matches(key).map(<[u8]>::to_vec).collect(),
                        )
                    })
                    .collect();
                keys.sort();
                keys
            })
            .collect()
    }

    #[test]
    fn snapshots_of_changes_restore_on_top_of_the_full_one() {
        let everything = KeyScope::everything();
        let request = |checkpoint, completed, changes| SnapshotRequest {
            checkpoint,
            completed,
            changes,
        };
        let mut j = join(false, false);
        let first: Vec<(Option<i64>, i64)> = (0..100).map(|i| (Some(i % 20), i)).collect();
        run(&mut j, 0, bids(&first, &vec![Insert; first.len()]));
        run(&mut j, 1, auctions(&[(3, "c"), (4, "d")], &[Insert; 2]));
        let full = j.snapshot(&request(1, None, true)).unwrap();
        assert_eq!(full.kind, StateKind::Full, "nothing completed to extend");

        // After checkpoint 1: a bid held since before it and one added after it are
        // deleted, an equal copy of an old bid is added, an auction is replaced.
        run(
            &mut j,
            0,
            bids(&[(Some(7), 1000), (Some(3), 23)], &[Insert; 2]),
        );
        run(
            &mut j,
            0,
            bids(&[(Some(5), 5), (Some(7), 1000)], &[Delete; 2]),
        );
        run(
            &mut j,
            1,
            auctions(&[(3, "c"), (3, "c2")], &[Delete, Insert]),
        );
        let second = j.snapshot(&request(2, Some(1), true)).unwrap();
        assert_eq!(second.kind, StateKind::Changes);
        assert!(
            second.bytes.len() * 5 < full.bytes.len(),
            "{} bytes of changes, {} in all",
            second.bytes.len(),
            full.bytes.len()
        );
        let at_2 = held(&j);

        // Checkpoint 2 never completes: 3 extends 1 again, with everything since.
        run(
            &mut j,
            0,
            bids(&[(Some(3), 23), (Some(19), 77)], &[Delete, Insert]),
        );
        let third = j.snapshot(&request(3, Some(1), true)).unwrap();
        assert_eq!(third.kind, StateKind::Changes);
        let at_3 = held(&j);

        for (chain, expected) in [(vec![&full, &second], &at_2), (vec![&full, &third], &at_3)] {
            let mut restored = join(false, false);
            let pieces: Vec<&[u8]> = chain.iter().map(|s| s.bytes.as_ref()).collect();
            restored.restore(&pieces, &everything).unwrap();
            assert_eq!(&held(&restored), expected);
        }
        assert_ne!(at_2, at_3);
    }

    #[test]
    fn a_restored_state_is_extended_by_the_changes_since_the_restore() {
        let everything = KeyScope::everything();
        let mut before = join(false, false);
        let first: Vec<(Option<i64>, i64)> = (0..100).map(|i| (Some(i % 20), i)).collect();
        run(&mut before, 0, bids(&first, &vec![Insert; first.len()]));
        run(&mut before, 1, auctions(&[(3, "c")], &[Insert]));
        let full = before.snapshot(&SnapshotRequest::full(5)).unwrap();

        let mut j = join(false, false);
        j.restore(&[full.bytes.as_ref()], &everything).unwrap();
        j.restored_from(5);
        // A restored bid and the auction go, a new bid comes.
        run(
            &mut j,
            0,
            bids(&[(Some(5), 5), (Some(8), 800)], &[Delete, Insert]),
        );
        run(&mut j, 1, auctions(&[(3, "c")], &[Delete]));
        let request = SnapshotRequest {
            checkpoint: 7,
            completed: Some(5),
            changes: true,
        };
        let changes = j.snapshot(&request).unwrap();
        assert_eq!(changes.kind, StateKind::Changes);
        assert!(
            changes.bytes.len() * 5 < full.bytes.len(),
            "only what changed"
        );

        let mut restored = join(false, false);
        let chain = [full.bytes.as_ref(), changes.bytes.as_ref()];
        restored.restore(&chain, &everything).unwrap();
        assert_eq!(held(&restored), held(&j));
        assert_ne!(held(&restored), held(&before));
    }
}
