//! The regular and interval join operator: its state, its steps and its snapshots.
//!
//! A chunk from one input goes through three steps: [`probe`] finds every pair of its rows
//! with the other side's held rows of their key and evaluates the rest of the condition;
//! [`bookkeeping`] then walks the chunk row by row, counting partners' matches and holding
//! or retracting the row, and notes what an outer, semi or anti join emits beyond the
//! pairs; [`padding`] builds those rows (pairs, rows padded with NULLs) in order.

mod bookkeeping;
mod cold;
mod padding;
mod probe;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use arrow::datatypes::SchemaRef;
use arrow::row::RowConverter;
use datafusion_physical_expr::PhysicalExpr;
use eddy_common::chunk::Chunk;
use eddy_common::state::{Epochs, OperatorState, SnapshotRequest, StateWriter};
use eddy_common::{EddyError, Result};

use super::side::{ExpiredKeys, JoinSide, RowExtras, Unmatched};
use super::{IntervalBounds, JoinKind, JoinSpec, Retention};
use crate::partition::{KeyScope, key_groups};
use crate::state_context::StateContext;
use crate::stored_runs::{INLINE_LAYOUT, RUNS_LAYOUT};
use crate::{Operator, open_snapshot_versions};
use cold::ColdKeys;

/// The join's snapshot format: 1 held each side's keys and rows; 2 puts the rows removed
/// before them (a snapshot of changes since an earlier one); 3 gives each row of an outer
/// join's preserved side its match count; 4 says after the version which sides' rows carry
/// the time they were written (bit 0 the left, bit 1 the right: a side with a state TTL);
/// 5 says first whether the rows follow or the runs of an LSM store hold them.
pub(crate) const SNAPSHOT_VERSION: u64 = 5;

/// A streaming join of one subtask (inner, outer, semi or anti; regular or interval);
/// input 0 is the left side, input 1 the right.
#[derive(Debug)]
pub struct StreamingJoin {
    sides: [JoinSide; 2],
    epochs: Epochs,
    /// Bytes per held row in the latest snapshot that held any.
    snapshot_bytes_per_row: f64,
    key_codec: RowConverter,
    filter: Option<Arc<dyn PhysicalExpr>>,
    nulls_equal: bool,
    /// The rows emitted.
    schema: SchemaRef,
    /// A left row followed by a right row: the pairs the condition is evaluated on.
    pair_schema: SchemaRef,
    max_parallelism: usize,
    kind: JoinKind,
    retention: Retention,
    /// The watermark, for an interval join.
    watermark: i64,
    /// The wall clock, for the state TTL (replaced in tests).
    clock: fn() -> i64,
    /// The keys in an LSM store, with the LSM backend (regular joins).
    cold: Option<ColdKeys>,
    /// Where the files of restored snapshots are.
    restored_files: std::path::PathBuf,
}

/// What the state TTL says for one chunk from one input.
#[derive(Debug, Clone, Copy, Default)]
struct TtlNow {
    /// The time a row of the chunk's side is written at, if that side has a TTL.
    this: Option<i64>,
    /// The time a row of the other side is renewed at, if that side has a TTL.
    other: Option<i64>,
    /// Rows of the other side written at or before this are expired, dropped or not.
    other_expired: Option<i64>,
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
            pair_schema: match spec.kind.filtering() {
                Some(_) => super::pair_schema(&spec.left_schema, &spec.right_schema),
                None => spec.schema.clone(),
            },
            max_parallelism,
            kind: spec.kind,
            retention: spec.retention,
            watermark: i64::MIN,
            clock: crate::wall_clock,
            cold: None,
            restored_files: std::path::PathBuf::new(),
        })
    }

    /// Keeps rows where `context` says: with the LSM backend, the keys beyond its memory
    /// in an LSM store.
    pub fn with_state(mut self, context: &StateContext) -> Result<Self> {
        self.restored_files = context.restored.clone();
        if context.is_lsm() {
            self.cold = Some(ColdKeys::new(context)?);
        }
        Ok(self)
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
        // Keys on disk come back first: the TTL then treats them as rows in memory.
        let keys = self.fetch_keys(input, &chunk)?;
        let now = self.expire_idle_rows(input)?;
        let probe = self.probe(input, &chunk, now.other_expired)?;
        if self.kind.is_inner()
            && let Some(pairs) = probe.kept_pairs()?
        {
            out.push(pairs);
        }
        let emitted = self.book(input, &chunk, &probe, now)?;
        out.extend(self.emit(input, &chunk, &probe, &emitted)?);
        self.settle_keys(input, keys)
    }

    /// Drops rows that outlived their state TTL; what the TTL says for a chunk now.
    fn expire_idle_rows(&mut self, input: usize) -> Result<TtlNow> {
        let ttl = self.retention.state_ttl();
        let now = ttl.iter().any(Option::is_some).then(|| (self.clock)());
        let expired = expired_before(ttl, now);
        self.expire_through(expired)?;
        Ok(TtlNow {
            this: now.filter(|_| ttl[input].is_some()),
            other: now.filter(|_| ttl[1 - input].is_some()),
            other_expired: expired[1 - input],
        })
    }

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

    /// Drops, per side, the rows written at its bound or before.
    fn expire_through(&mut self, bounds: [Option<i64>; 2]) -> Result<()> {
        let epoch = self.epochs.current();
        for (side, bound) in bounds.into_iter().enumerate() {
            if let Some(bound) = bound {
                // Rows that outlive a TTL leave without a padded row, as in Flink.
                self.expire_rows(side, bound, epoch, None)?;
            }
        }
        Ok(())
    }

    /// Drops the rows the watermark has put out of the other side's reach (with the LSM
    /// backend, reading back first the stored keys whose rows it reaches); an outer join's
    /// rows that joined nothing are emitted padded then (as Flink's interval join does:
    /// once, append-only).
    fn expire(&mut self, interval: IntervalBounds, out: &mut Vec<Chunk>) -> Result<()> {
        loop {
            let more = self.load_expiring_keys()?;
            for input in 0..2 {
                self.expire_side(interval, input, out)?;
            }
            self.evict_keys()?;
            if !more {
                return Ok(());
            }
        }
    }

    /// Drops the rows of input `input` the watermark has put out of the other side's reach.
    fn expire_side(
        &mut self,
        interval: IntervalBounds,
        input: usize,
        out: &mut Vec<Chunk>,
    ) -> Result<()> {
        let epoch = self.epochs.current();
        // A row of time t is held while t + reach > watermark.
        let bound = self.watermark.saturating_sub(interval.reach(input));
        let mut unmatched = Unmatched::default();
        let collect = self.kind.counts_matches(input).then_some(&mut unmatched);
        self.expire_rows(input, bound, epoch, collect)?;
        if !unmatched.is_empty() {
            out.push(self.padded_rows(input, &unmatched)?);
        }
        Ok(())
    }

    /// Drops the rows of side `side` that expire by `bound` (those that joined nothing into
    /// `unmatched` when given), and settles the keys they leave with the LSM backend.
    fn expire_rows(
        &mut self,
        side: usize,
        bound: i64,
        epoch: u32,
        unmatched: Option<&mut Unmatched>,
    ) -> Result<()> {
        let mut expired = self.cold.is_some().then(ExpiredKeys::default);
        self.sides[side].expire_through(bound, epoch, unmatched, expired.as_mut());
        self.settle_expired(side, expired)
    }

    /// Gives restored rows their event times, so that they expire.
    fn time_restored_rows(&mut self) -> Result<()> {
        let Some(interval) = self.retention.interval() else {
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

    /// Reads one snapshot into the sides, keeping the key groups `scope` owns; a snapshot
    /// of an LSM store's runs adds their names to `stores` instead.
    fn restore_one(
        &mut self,
        snapshot: &[u8],
        scope: &KeyScope,
        stores: &mut Vec<Vec<String>>,
    ) -> Result<()> {
        // Restored rows belong to the snapshot restored from (see `restored_from`).
        let epoch = 0;
        let (version, mut input) = open_snapshot_versions(snapshot, "a join", SNAPSHOT_VERSION)?;
        let layout = match version {
            5.. => input.u64()?,
            _ => INLINE_LAYOUT,
        };
        if layout == RUNS_LAYOUT {
            stores.push(crate::stored_runs::read_manifest(&mut input, "a join")?);
            return Ok(());
        }
        let times = match version {
            4.. => input.u64()?,
            _ => 0,
        };
        // The TTL clock goes on from the rows' write times (from the restore for rows
        // written without a TTL).
        let now = (self.clock)();
        let ttl = self.retention.state_ttl();
        for (index, side) in self.sides.iter_mut().enumerate() {
            if version >= 2 {
                side.load_removals(&mut input)?;
            }
            let with = RowExtras {
                counts: version >= 3 && self.kind.counts_matches(index),
                times: times & (1 << index) != 0,
            };
            let timed = ttl[index].map(|_| now);
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
        Ok(())
    }
}

/// Per side, the time at or before which rows written are expired at `now` (with a state
/// TTL on that side).
fn expired_before(ttl: [Option<i64>; 2], now: Option<i64>) -> [Option<i64>; 2] {
    ttl.map(|ttl| Some(now? - ttl?))
}

impl Operator for StreamingJoin {
    fn process(&mut self, chunk: Chunk, out: &mut Vec<Chunk>) -> Result<()> {
        self.join(0, chunk, out)
    }

    fn watermark_delay(&self) -> i64 {
        self.retention
            .interval()
            .map_or(0, |b| b.reach(0).max(b.reach(1)).max(0))
    }

    fn on_watermark(&mut self, watermark: i64, out: &mut Vec<Chunk>) -> Result<()> {
        if let Some(interval) = self.retention.interval()
            && watermark > self.watermark
        {
            self.watermark = watermark;
            self.expire(interval, out)?;
        }
        Ok(())
    }

    fn process_input(&mut self, input: usize, chunk: Chunk, out: &mut Vec<Chunk>) -> Result<()> {
        self.join(input, chunk, out)
    }

    fn snapshot(&mut self, request: &SnapshotRequest) -> Result<OperatorState> {
        // Expired rows are not written (and a snapshot of changes drops them).
        let ttl = self.retention.state_ttl();
        let timed = ttl.map(|ttl| ttl.is_some());
        let now = timed.contains(&true).then(|| (self.clock)());
        self.expire_through(expired_before(ttl, now))?;
        if self.cold.is_some() {
            return self.snapshot_runs();
        }
        let scope = self.epochs.close(request);
        let mut out = StateWriter::new();
        out.u64(SNAPSHOT_VERSION).compact();
        out.u64(INLINE_LAYOUT);
        out.u64(timed[0] as u64 | (timed[1] as u64) << 1);
        for side in &mut self.sides {
            if let Some(settled) = scope.settled {
                side.forget_removals_through(settled);
            }
        }
        // Match counts change on old rows too: such a join's snapshots are whole.
        let counted = (0..2).any(|input| self.kind.counts_matches(input));
        let changes_after = scope.changes_after.filter(|_| !counted);
        let mut rows = 0;
        for (input, side) in self.sides.iter().enumerate() {
            let keys: Vec<(u32, &[u8])> = side.keys(changes_after).collect();
            let groups = self.key_groups_of(&keys)?;
            side.save_removals(changes_after, &mut out);
            out.u64(keys.len() as u64);
            for ((slot, _), key_group) in keys.iter().zip(groups) {
                let with = RowExtras {
                    counts: self.kind.counts_matches(input),
                    times: timed[input],
                };
                rows += side.save(*slot, key_group, changes_after, with, &mut out);
            }
        }
        let bytes = out.finish();
        if rows > 0 {
            self.snapshot_bytes_per_row = bytes.len() as f64 / rows as f64;
        }
        Ok(match counted {
            true => OperatorState::full(bytes),
            false => scope.state(bytes),
        })
    }

    fn full_snapshot_estimate(&self) -> u64 {
        let rows: usize = self.sides.iter().map(JoinSide::len).sum();
        (rows as f64 * self.snapshot_bytes_per_row) as u64
    }

    fn restore(&mut self, snapshots: &[&[u8]], scope: &KeyScope) -> Result<()> {
        let mut stores = Vec::new();
        for snapshot in snapshots {
            self.restore_one(snapshot, scope, &mut stores)?;
        }
        self.restore_runs(stores, scope)?;
        self.time_restored_rows()
    }

    fn restored_from(&mut self, checkpoint: u64) {
        self.epochs.restored(checkpoint);
    }
}
