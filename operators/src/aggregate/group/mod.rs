//! Unbounded `GROUP BY`: every chunk updates the groups it touches, then emits, per
//! changed group, `-U` old / `+U` new (`+I` for a new group, `-D` for a group whose last
//! row was retracted). In upsert mode the `-U` rows are left out.
//!
//! Snapshots can be incremental: each group carries the epoch it last changed in and
//! removed keys are remembered, so a snapshot of changes holds only the keys removed and
//! the groups changed since the completed snapshot it extends.
//!
//! With a state TTL, a group not updated for the TTL is dropped (without a `-D`, as in
//! Flink): a later row of its key starts a new group (`+I`), a retraction finds nothing.
//!
//! With the LSM backend ([`cold`]) groups beyond the memory budget live in an LSM store,
//! and snapshots are the store's runs.

mod cold;

use std::sync::Arc;

use arrow::array::{ArrayRef, UInt32Array};
use arrow::compute::{interleave, take};
use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use arrow::row::{RowConverter, SortField};
use datafusion_physical_expr::PhysicalExpr;
use eddy_common::Result;
use eddy_common::chunk::{Chunk, Op};
use eddy_common::event::Timestamp;
use eddy_common::state::{Epochs, OperatorState, Removals, SnapshotRequest, StateReader};

use super::{
    Accumulators, AggregateCall, Emitted, Slots, open_snapshot, signs_of, snapshot_writer,
};
use crate::cold_slots::{self, ColdSlots};
use crate::group_keys::GroupKeys;
use crate::partition::{KeyScope, key_groups};
use crate::state_context::StateContext;
use crate::stored_runs::{INLINE_LAYOUT, RUNS_LAYOUT};
use crate::ttl::StateTtl;
use crate::{Operator, evaluate};

/// A non-windowed aggregation producing a retract (or upsert) changelog.
#[derive(Debug)]
pub struct GroupAggregate {
    keys: Vec<Arc<dyn PhysicalExpr>>,
    key_codec: RowConverter,
    result_codec: RowConverter,
    accumulators: Accumulators,
    group_keys: GroupKeys,
    row_counts: Vec<i64>,
    touched_mark: Vec<bool>,
    /// The epoch each group last changed in.
    changed: Vec<u32>,
    epochs: Epochs,
    /// Keys removed since the newest completed snapshot.
    removals: Removals,
    /// Bytes per group in the latest snapshot that held any.
    snapshot_bytes_per_group: f64,
    slots: Slots,
    emit_update_before: bool,
    schema: SchemaRef,
    max_parallelism: usize,
    /// When groups were last updated, with a state TTL.
    ttl: Option<StateTtl>,
    /// The groups in an LSM store, with the LSM backend.
    cold: Option<ColdSlots>,
    /// Where the files of restored snapshots are.
    restored_files: std::path::PathBuf,
}

impl GroupAggregate {
    /// Groups by `keys` (evaluated on the input), computes `calls`, and emits rows of
    /// `schema` (keys, then aggregates). Without `emit_update_before` it emits an upsert
    /// stream (no `-U`).
    pub fn new(
        keys: Vec<Arc<dyn PhysicalExpr>>,
        key_types: Vec<arrow::datatypes::DataType>,
        calls: Vec<AggregateCall>,
        emit_update_before: bool,
        schema: SchemaRef,
        max_parallelism: usize,
    ) -> Result<Self> {
        let key_codec = RowConverter::new(key_types.into_iter().map(SortField::new).collect())?;
        let result_codec = RowConverter::new(
            calls
                .iter()
                .map(|c| SortField::new(c.output_type.clone()))
                .collect(),
        )?;
        Ok(GroupAggregate {
            keys,
            key_codec,
            result_codec,
            accumulators: Accumulators::new(calls)?,
            group_keys: GroupKeys::default(),
            row_counts: Vec::new(),
            touched_mark: Vec::new(),
            changed: Vec::new(),
            epochs: Epochs::default(),
            removals: Removals::default(),
            snapshot_bytes_per_group: 0.0,
            slots: Slots::default(),
            emit_update_before,
            schema,
            max_parallelism,
            ttl: None,
            cold: None,
            restored_files: std::path::PathBuf::new(),
        })
    }

    /// Keeps groups where `context` says: with the LSM backend, those beyond its memory in
    /// an LSM store (a grouping without keys has one group and keeps it in memory).
    pub fn with_state(mut self, context: &StateContext) -> Result<Self> {
        self.restored_files = context.restored.clone();
        if context.is_lsm() && !self.keys.is_empty() {
            self.cold = Some(ColdSlots::new(context, self.slots.len)?);
        }
        Ok(self)
    }

    /// Drops groups not updated for `ttl_ms` milliseconds (`None`: keeps them for good).
    pub fn with_state_ttl(mut self, ttl_ms: Option<i64>) -> Self {
        self.ttl = ttl_ms.map(StateTtl::new);
        self
    }

    /// Drops the groups whose TTL passed by `now`, remembering their keys as removed.
    fn drop_expired(&mut self, now: i64) -> Result<()> {
        let Some(ttl) = &mut self.ttl else {
            return Ok(());
        };
        let epoch = self.epochs.current();
        for group in ttl.expired(now) {
            self.drop_group(group, epoch)?;
        }
        Ok(())
    }

    /// Removes a live group whose state goes (its last row retracted, or expired).
    fn drop_group(&mut self, group: u32, epoch: u32) -> Result<()> {
        if self.row_counts[group as usize] > 0 && self.cold.is_none() {
            self.removals
                .push(epoch, 0, self.group_keys.key(group), &[]);
        }
        self.remove_group(group)
    }

    /// A new group for `key` (whose hash is `hash`).
    fn insert_group(&mut self, hash: u64, key: &[u8]) -> u32 {
        let (slot, grown) = self.slots.acquire();
        if grown {
            self.grow();
        }
        self.group_keys.insert(hash, key, slot);
        slot
    }

    /// Removes `group` for good: frees its slot and deletes what the store holds of it.
    /// Removing it again does nothing: a slot freed twice would be handed to two later
    /// groups (a restore may list one key's removal more than once).
    fn remove_group(&mut self, group: u32) -> Result<()> {
        if !self.group_keys.holds(group) {
            return Ok(());
        }
        if let Some(cold) = &mut self.cold {
            cold.removed(group, self.group_keys.key(group))?;
        }
        self.free_slot(group);
        Ok(())
    }

    /// Frees `group`'s slot and state in memory.
    fn free_slot(&mut self, group: u32) {
        if let Some(ttl) = &mut self.ttl {
            ttl.forget(group);
        }
        self.group_keys.remove(group);
        self.row_counts[group as usize] = 0;
        self.accumulators.reset(group);
        self.slots.release(group);
    }

    fn grow(&mut self) {
        let len = self.slots.len;
        self.accumulators.resize(len);
        self.row_counts.resize(len, 0);
        self.touched_mark.resize(len, false);
        self.changed.resize(len, 0);
        if let Some(cold) = &mut self.cold {
            cold.resize(len);
        }
    }

    /// The key columns of `groups`.
    fn key_columns(&self, groups: &[u32]) -> Result<Vec<ArrayRef>> {
        if self.keys.is_empty() {
            return Ok(Vec::new());
        }
        let parser = self.key_codec.parser();
        let rows: Vec<_> = groups
            .iter()
            .map(|g| parser.parse(self.group_keys.key(*g)))
            .collect();
        Ok(self.key_codec.convert_rows(rows)?)
    }
}

impl Operator for GroupAggregate {
    fn snapshot(&mut self, request: &SnapshotRequest) -> Result<OperatorState> {
        // Expired groups are not written (and a snapshot of changes drops them).
        if let Some(now) = self.ttl.as_ref().map(StateTtl::now) {
            self.drop_expired(now)?;
        }
        if self.cold.is_some() {
            return cold_slots::snapshot(self, snapshot_writer(256));
        }
        let scope = self.epochs.close(request);
        if let Some(settled) = scope.settled {
            self.removals.forget_through(settled);
        }
        let changed = |g: u32| {
            scope
                .changes_after
                .is_none_or(|e| self.changed[g as usize] > e)
        };
        let live: Vec<u32> = (0..self.slots.len as u32)
            .filter(|g| self.row_counts[*g as usize] > 0 && changed(*g))
            .collect();
        let key_groups = match self.keys.is_empty() {
            true => vec![0; live.len()],
            false => key_groups(&self.key_columns(&live)?, self.max_parallelism)?,
        };
        // Room for every group, judged by the first (regrowing a large buffer costs copies).
        let per_group = live
            .first()
            .map_or(0, |g| self.group_keys.key(*g).len() + 24);
        let mut out = snapshot_writer(16 + live.len() * per_group);
        out.u64(INLINE_LAYOUT);
        self.removals.save(scope.changes_after, &mut out);
        out.u64(self.ttl.is_some() as u64).u64(live.len() as u64);
        for (group, key_group) in live.iter().zip(key_groups) {
            out.bytes(self.group_keys.key(*group))
                .u64(key_group as u64)
                .i64(self.row_counts[*group as usize]);
            if let Some(ttl) = &self.ttl {
                out.i64(ttl.written(*group).unwrap_or(Timestamp::MIN));
            }
            self.accumulators.save(*group, &mut out);
        }
        let bytes = out.finish();
        if !live.is_empty() {
            self.snapshot_bytes_per_group = bytes.len() as f64 / live.len() as f64;
        }
        Ok(scope.state(bytes))
    }

    fn full_snapshot_estimate(&self) -> u64 {
        (self.slots.in_use() as f64 * self.snapshot_bytes_per_group) as u64
    }

    fn restore(&mut self, snapshots: &[&[u8]], scope: &KeyScope) -> Result<()> {
        let mut stores = Vec::new();
        for snapshot in snapshots {
            let (version, mut input) = open_snapshot(snapshot, "a GROUP BY")?;
            let layout = match version {
                ..=4 => INLINE_LAYOUT,
                _ => input.u64()?,
            };
            if layout == RUNS_LAYOUT {
                stores.push(stored_runs_manifest(&mut input)?);
                continue;
            }
            self.restore_inline(version, input, scope)?;
        }
        let restored = self.restored_files.clone();
        cold_slots::restore(self, &restored, stores, scope)
    }

    fn restored_from(&mut self, checkpoint: u64) {
        // Restored groups carry epoch 0 (`changed` starts at 0).
        self.epochs.restored(checkpoint);
    }

    fn process(&mut self, chunk: Chunk, out: &mut Vec<Chunk>) -> Result<()> {
        let now = self.ttl.as_ref().map(StateTtl::now);
        if let Some(now) = now {
            self.drop_expired(now)?;
        }
        let batch = self.assign_groups(&chunk, now)?;
        if batch.touched.is_empty() {
            return Ok(());
        }
        let before_groups: Vec<u32> = batch
            .touched
            .iter()
            .zip(&batch.existed)
            .filter(|(_, e)| **e)
            .map(|(g, _)| *g)
            .collect();
        let before = self.accumulators.evaluate(&before_groups)?;
        self.accumulators
            .update(chunk.rows(), &batch.group_ids, &batch.signs)?;
        for (g, s) in batch.group_ids.iter().zip(&batch.signs) {
            self.row_counts[*g as usize] += *s as i64;
        }
        let after_groups: Vec<u32> = batch
            .touched
            .iter()
            .copied()
            .filter(|g| self.row_counts[*g as usize] > 0)
            .collect();
        let after = self.accumulators.evaluate(&after_groups)?;
        if let Some(changes) = self.changes(&batch, &before, &after)? {
            out.push(changes);
        }
        self.settle(batch.touched, now)?;
        Ok(())
    }
}

/// The run names of a GROUP BY snapshot of the runs layout.
fn stored_runs_manifest(input: &mut StateReader<'_>) -> Result<Vec<String>> {
    crate::stored_runs::read_manifest(input, "a GROUP BY")
}

impl GroupAggregate {
    /// Restores a snapshot that holds its groups (or the changes to them since the one
    /// before), keeping those `scope` owns.
    fn restore_inline(
        &mut self,
        version: u64,
        mut input: StateReader<'_>,
        scope: &KeyScope,
    ) -> Result<()> {
        if version >= 3 {
            // Removed since the snapshot this one extends; then the groups changed.
            let mut removed = Vec::new();
            Removals::load(&mut input, |key, _| {
                if let Some(group) = self.group_keys.find(self.group_keys.hash(key), key) {
                    removed.push(group);
                }
            })?;
            for group in removed {
                self.remove_group(group)?;
            }
        }
        let timed = version >= 4 && input.u64()? == 1;
        let restored_at = self.ttl.as_ref().map(StateTtl::now);
        for _ in 0..input.count(24)? {
            let key = input.bytes()?;
            let key_group = input.u64()? as usize;
            let rows = input.i64()?;
            let written = match timed {
                true => Some(input.i64()?),
                false => None,
            };
            let hash = self.group_keys.hash(key);
            let group = match self.group_keys.find(hash, key) {
                Some(group) => {
                    self.accumulators.reset(group);
                    group
                }
                None => self.insert_group(hash, key),
            };
            self.row_counts[group as usize] = rows;
            self.accumulators.load(group, &mut input)?;
            // The TTL clock goes on from the snapshot's write times (from the restore
            // for a snapshot taken without a TTL).
            if let (Some(ttl), Some(now)) = (&mut self.ttl, restored_at) {
                ttl.write(group, written.unwrap_or(now));
            }
            if let Some(cold) = &mut self.cold {
                cold.placed(group, key_group as u16, false);
            }
            if !self.keys.is_empty() && !scope.owns(key_group) {
                // Another subtask owns this key now.
                self.free_slot(group);
            }
        }
        Ok(())
    }
}

/// A chunk's rows by group: each row's group and sign, and the groups it touched.
struct GroupedChunk {
    /// Each row's group (0 for a retraction of a group never seen).
    group_ids: Vec<u32>,
    /// Each row's sign: +1 adds it, -1 takes it back, 0 ignores it.
    signs: Vec<i8>,
    /// The groups touched, in the order first touched.
    touched: Vec<u32>,
    /// Whether each touched group held rows before the chunk.
    existed: Vec<bool>,
}

impl GroupAggregate {
    /// The group of each row of `chunk` (created when new; an expired one is dropped
    /// first), its sign, and the groups touched.
    fn assign_groups(&mut self, chunk: &Chunk, now: Option<i64>) -> Result<GroupedChunk> {
        let key_arrays = self
            .keys
            .iter()
            .map(|k| evaluate(k, chunk.rows()))
            .collect::<Result<Vec<_>>>()?;
        let rows = match self.keys.is_empty() {
            true => None,
            false => Some(self.key_codec.convert_columns(&key_arrays)?),
        };
        let mut batch = GroupedChunk {
            group_ids: Vec::with_capacity(chunk.num_rows()),
            signs: signs_of(chunk),
            touched: Vec::new(),
            existed: Vec::new(),
        };
        // Where each row's group is in the store, with the LSM backend.
        let key_groups = match &mut self.cold {
            Some(cold) => {
                cold.next_chunk();
                key_groups(&key_arrays, self.max_parallelism)?
            }
            None => Vec::new(),
        };
        for (i, sign) in batch.signs.iter_mut().enumerate() {
            let key = rows.as_ref().map_or(&[][..], |r| r.row(i).data());
            let hash = self.group_keys.hash(key);
            let mut found = self.group_keys.find(hash, key);
            if let (Some(g), Some(now), Some(ttl)) = (found, now, &self.ttl)
                && !self.touched_mark[g as usize]
                && ttl.is_expired(g, now)
            {
                // Expired, not yet dropped: it is not read again.
                self.drop_group(g, self.epochs.current())?;
                found = None;
            }
            if found.is_none() && self.cold.is_some() {
                found = cold_slots::load(self, key, key_groups[i] as u16, now)?;
            }
            let group = match found {
                Some(g) => g,
                None if *sign < 0 => {
                    // A retraction of a group never seen: nothing to take back.
                    *sign = 0;
                    batch.group_ids.push(0);
                    continue;
                }
                None => {
                    let group = self.insert_group(hash, key);
                    if let Some(cold) = &mut self.cold {
                        cold.placed(group, key_groups[i] as u16, false);
                    }
                    group
                }
            };
            if !self.touched_mark[group as usize] {
                self.touched_mark[group as usize] = true;
                batch.touched.push(group);
                batch.existed.push(self.row_counts[group as usize] > 0);
            }
            batch.group_ids.push(group);
        }
        Ok(batch)
    }

    /// The changes of the touched groups, from their results `before` the chunk (of the
    /// groups that existed) to `after` it (of the groups still alive); `None` when no
    /// result changed.
    fn changes(
        &self,
        batch: &GroupedChunk,
        before: &[ArrayRef],
        after: &[ArrayRef],
    ) -> Result<Option<Chunk>> {
        let before_rows = self.result_codec.convert_columns(before)?;
        let after_rows = self.result_codec.convert_columns(after)?;
        // (op, (0 = before / 1 = after, index)) and the touched position of each row.
        let mut emitted: Emitted = Vec::new();
        let mut key_positions: Vec<u32> = Vec::new();
        let (mut b, mut a) = (0usize, 0usize);
        for (position, (group, existed)) in batch.touched.iter().zip(&batch.existed).enumerate() {
            let alive = self.row_counts[*group as usize] > 0;
            match (*existed, alive) {
                (true, true) => {
                    if before_rows.row(b) != after_rows.row(a) {
                        if self.emit_update_before {
                            emitted.push((Op::UpdateBefore, (0, b)));
                            key_positions.push(position as u32);
                        }
                        emitted.push((Op::UpdateAfter, (1, a)));
                        key_positions.push(position as u32);
                    }
                    b += 1;
                    a += 1;
                }
                (true, false) => {
                    emitted.push((Op::Delete, (0, b)));
                    key_positions.push(position as u32);
                    b += 1;
                }
                (false, true) => {
                    emitted.push((Op::Insert, (1, a)));
                    key_positions.push(position as u32);
                    a += 1;
                }
                (false, false) => {}
            }
        }
        if emitted.is_empty() {
            return Ok(None);
        }
        let keys = self.key_columns(&batch.touched)?;
        let positions = UInt32Array::from(key_positions);
        let mut columns: Vec<ArrayRef> = keys
            .iter()
            .map(|k| take(k.as_ref(), &positions, None))
            .collect::<Result<_, _>>()?;
        let picks: Vec<(usize, usize)> = emitted.iter().map(|(_, p)| *p).collect();
        for (before_col, after_col) in before.iter().zip(after) {
            columns.push(interleave(
                &[before_col.as_ref(), after_col.as_ref()],
                &picks,
            )?);
        }
        let rows = RecordBatch::try_new(self.schema.clone(), columns)?;
        Ok(Some(Chunk::from_ops(
            rows,
            emitted.iter().map(|(op, _)| *op).collect(),
        )))
    }

    /// After a chunk: the touched groups are marked changed in this epoch; those left
    /// without rows are removed, the others' TTL renewed.
    fn settle(&mut self, touched: Vec<u32>, now: Option<i64>) -> Result<()> {
        let epoch = self.epochs.current();
        for group in touched {
            self.touched_mark[group as usize] = false;
            self.changed[group as usize] = epoch;
            if let Some(cold) = &mut self.cold {
                cold.touched(group);
            }
            if self.row_counts[group as usize] <= 0 {
                if self.cold.is_none() {
                    self.removals
                        .push(epoch, 0, self.group_keys.key(group), &[]);
                }
                self.remove_group(group)?;
            } else if let (Some(ttl), Some(now)) = (&mut self.ttl, now) {
                ttl.write(group, now);
            }
        }
        cold_slots::evict(self)
    }
}

#[cfg(test)]
mod tests;
