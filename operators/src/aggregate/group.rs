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
use eddy_common::state::{Epochs, OperatorState, Removals, SnapshotRequest};

use super::{
    Accumulators, AggregateCall, Emitted, Slots, open_snapshot, signs_of, snapshot_writer,
};
use crate::group_keys::GroupKeys;
use crate::partition::{KeyScope, key_groups};
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
        })
    }

    /// Drops groups not updated for `ttl_ms` milliseconds (`None`: keeps them for good).
    pub fn with_state_ttl(mut self, ttl_ms: Option<i64>) -> Self {
        self.ttl = ttl_ms.map(StateTtl::new);
        self
    }

    /// Drops the groups whose TTL passed by `now`, remembering their keys as removed.
    fn drop_expired(&mut self, now: i64) {
        let Some(ttl) = &mut self.ttl else {
            return;
        };
        let epoch = self.epochs.current();
        for group in ttl.expired(now) {
            self.drop_group(group, epoch);
        }
    }

    /// Removes a live group whose state goes (its last row retracted, or expired).
    fn drop_group(&mut self, group: u32, epoch: u32) {
        if self.row_counts[group as usize] > 0 {
            self.removals
                .push(epoch, 0, self.group_keys.key(group), &[]);
        }
        self.remove_group(group);
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

    /// Frees `group`'s slot and state.
    fn remove_group(&mut self, group: u32) {
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
            self.drop_expired(now);
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
        for snapshot in snapshots {
            let (version, mut input) = open_snapshot(snapshot, "a GROUP BY")?;
            if version >= 3 {
                // Removed since the snapshot this one extends; then the groups changed.
                Removals::load(&mut input, |key, _| {
                    if let Some(group) = self.group_keys.find(self.group_keys.hash(key), key) {
                        self.remove_group(group);
                    }
                })?;
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
                if !self.keys.is_empty() && !scope.owns(key_group) {
                    // Another subtask owns this key now.
                    self.remove_group(group);
                }
            }
        }
        Ok(())
    }

    fn restored_from(&mut self, checkpoint: u64) {
        // Restored groups carry epoch 0 (`changed` starts at 0).
        self.epochs.restored(checkpoint);
    }

    fn process(&mut self, chunk: Chunk, out: &mut Vec<Chunk>) -> Result<()> {
        let now = self.ttl.as_ref().map(StateTtl::now);
        if let Some(now) = now {
            self.drop_expired(now);
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
        self.settle(batch.touched, now);
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
        for (i, sign) in batch.signs.iter_mut().enumerate() {
            let key = rows.as_ref().map_or(&[][..], |r| r.row(i).data());
            let hash = self.group_keys.hash(key);
            let mut found = self.group_keys.find(hash, key);
            if let (Some(g), Some(now), Some(ttl)) = (found, now, &self.ttl)
                && !self.touched_mark[g as usize]
                && ttl.is_expired(g, now)
            {
                // Expired, not yet dropped: it is not read again.
                self.drop_group(g, self.epochs.current());
                found = None;
            }
            let group = match found {
                Some(g) => g,
                None if *sign < 0 => {
                    // A retraction of a group never seen: nothing to take back.
                    *sign = 0;
                    batch.group_ids.push(0);
                    continue;
                }
                None => self.insert_group(hash, key),
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
    fn settle(&mut self, touched: Vec<u32>, now: Option<i64>) {
        let epoch = self.epochs.current();
        for group in touched {
            self.touched_mark[group as usize] = false;
            self.changed[group as usize] = epoch;
            if self.row_counts[group as usize] <= 0 {
                self.removals
                    .push(epoch, 0, self.group_keys.key(group), &[]);
                self.remove_group(group);
            } else if let (Some(ttl), Some(now)) = (&mut self.ttl, now) {
                ttl.write(group, now);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::Int64Array;
    use arrow::datatypes::{DataType, Field, Schema};
    use arrow::util::display::array_value_to_string;
    use datafusion_physical_expr::expressions::Column;
    use eddy_common::state::StateKind;

    use crate::aggregate::AggregateKind;

    /// `SELECT k, COUNT(v), MAX(v) ... GROUP BY k` over an updating input.
    fn count_and_max() -> GroupAggregate {
        let call = |kind| AggregateCall {
            kind,
            arg: Arc::new(Column::new("v", 1)),
            filter: None,
            input_type: DataType::Int64,
            output_type: DataType::Int64,
            append_only: false,
        };
        let schema = Arc::new(Schema::new(vec![
            Field::new("k", DataType::Int64, true),
            Field::new("c", DataType::Int64, true),
            Field::new("m", DataType::Int64, true),
        ]));
        GroupAggregate::new(
            vec![Arc::new(Column::new("k", 0))],
            vec![DataType::Int64],
            vec![call(AggregateKind::Count), call(AggregateKind::Max)],
            true,
            schema,
            128,
        )
        .unwrap()
    }

    fn rows(rows: &[(i64, i64)], op: Op) -> Chunk {
        let schema = Arc::new(Schema::new(vec![
            Field::new("k", DataType::Int64, true),
            Field::new("v", DataType::Int64, true),
        ]));
        let k = Int64Array::from_iter_values(rows.iter().map(|r| r.0));
        let v = Int64Array::from_iter_values(rows.iter().map(|r| r.1));
        let batch = RecordBatch::try_new(schema, vec![Arc::new(k), Arc::new(v)]).unwrap();
        Chunk::from_ops(batch, vec![op; rows.len()])
    }

    fn apply(aggregate: &mut GroupAggregate, chunk: Chunk) {
        aggregate.process(chunk, &mut Vec::new()).unwrap();
    }

    /// Every group as "key rows count max", sorted.
    fn contents(aggregate: &GroupAggregate) -> Vec<String> {
        let live: Vec<u32> = (0..aggregate.slots.len as u32)
            .filter(|g| aggregate.row_counts[*g as usize] > 0)
            .collect();
        let keys = aggregate.key_columns(&live).unwrap();
        let values = aggregate.accumulators.evaluate(&live).unwrap();
        let mut groups: Vec<String> = (0..live.len())
            .map(|i| {
                let show = |a: &ArrayRef| array_value_to_string(a, i).unwrap();
                let rows = aggregate.row_counts[live[i] as usize];
                format!(
                    "{} {rows} {} {}",
                    show(&keys[0]),
                    show(&values[0]),
                    show(&values[1])
                )
            })
            .collect();
        groups.sort();
        groups
    }

    /// [`count_and_max`] with a state TTL of 1 s on the test clock.
    fn count_and_max_with_ttl() -> GroupAggregate {
        let mut aggregate = count_and_max().with_state_ttl(Some(1000));
        aggregate.ttl = aggregate
            .ttl
            .map(|ttl| ttl.with_clock(crate::ttl::test_clock::now));
        aggregate
    }

    /// The changes a chunk makes, as "op key count max".
    fn changes(aggregate: &mut GroupAggregate, chunk: Chunk) -> Vec<String> {
        let mut out = Vec::new();
        aggregate.process(chunk, &mut out).unwrap();
        out.iter().flat_map(Chunk::to_pretty).collect()
    }

    #[test]
    fn groups_idle_for_the_ttl_start_afresh_and_leave_snapshots() {
        use crate::ttl::test_clock;
        let request = |checkpoint, completed| SnapshotRequest {
            checkpoint,
            completed,
            changes: true,
        };
        let mut aggregate = count_and_max_with_ttl();
        test_clock::set(0);
        apply(&mut aggregate, rows(&[(1, 10), (2, 20)], Op::Insert));
        let full = aggregate.snapshot(&request(1, None)).unwrap();
        test_clock::set(600);
        apply(&mut aggregate, rows(&[(1, 5)], Op::Insert));
        // Key 2 was last written at 0: at 1000 it is gone, its next row a new group.
        test_clock::set(1000);
        assert_eq!(
            changes(&mut aggregate, rows(&[(2, 7)], Op::Insert)),
            ["+I 2 1 7"]
        );
        assert_eq!(
            changes(&mut aggregate, rows(&[(1, 30)], Op::Insert)),
            ["-U 1 2 10", "+U 1 3 30"]
        );
        // Key 1, written at 1000, outlives key 2 (at 1000 too) by nothing: both go at 2000;
        // at 1999 a snapshot of changes still holds both.
        test_clock::set(1999);
        let changed = aggregate.snapshot(&request(2, Some(1))).unwrap();
        let mut restored = count_and_max_with_ttl();
        restored
            .restore(&[&full.bytes, &changed.bytes], &KeyScope::everything())
            .unwrap();
        assert_eq!(contents(&restored), ["1 3 3 30", "2 1 1 7"]);
        // The restore kept the write times: at 2000 both are expired there too, and a
        // retraction of a gone group takes nothing back.
        test_clock::set(2000);
        assert!(changes(&mut restored, rows(&[(2, 7)], Op::Delete)).is_empty());
        assert_eq!(
            changes(&mut restored, rows(&[(1, 1)], Op::Insert)),
            ["+I 1 1 1"]
        );
        let later = restored.snapshot(&request(3, None)).unwrap();
        let mut again = count_and_max_with_ttl();
        again
            .restore(&[&later.bytes], &KeyScope::everything())
            .unwrap();
        assert_eq!(
            contents(&again),
            ["1 1 1 1"],
            "expired groups are not written"
        );
    }

    #[test]
    fn snapshots_of_changes_restore_on_top_of_the_full_one() {
        let request = |checkpoint, completed, changes| SnapshotRequest {
            checkpoint,
            completed,
            changes,
        };
        let everything = KeyScope::everything();
        let mut aggregate = count_and_max();
        let first: Vec<(i64, i64)> = (0..500).map(|i| (i % 50, i)).collect();
        apply(&mut aggregate, rows(&first, Op::Insert));
        let full = aggregate.snapshot(&request(1, None, true)).unwrap();
        assert_eq!(full.kind, StateKind::Full);

        // After 1: key 3 loses all its rows, key 7 its maximum, key 100 appears.
        let key_3: Vec<(i64, i64)> = first.iter().copied().filter(|r| r.0 == 3).collect();
        apply(&mut aggregate, rows(&key_3, Op::Delete));
        apply(&mut aggregate, rows(&[(7, 457)], Op::Delete));
        apply(&mut aggregate, rows(&[(100, 1)], Op::Insert));
        let second = aggregate.snapshot(&request(2, Some(1), true)).unwrap();
        assert_eq!(second.kind, StateKind::Changes);
        assert!(
            second.bytes.len() * 10 < full.bytes.len(),
            "{} bytes of changes, {} in all",
            second.bytes.len(),
            full.bytes.len()
        );
        let at_2 = contents(&aggregate);
        assert!(!at_2.iter().any(|g| g.starts_with("3 ")));

        // 2 never completes: 3 extends 1 with everything since. Key 3 comes back and key
        // 100 (born after 1) goes.
        apply(&mut aggregate, rows(&[(3, 9), (8, 1000)], Op::Insert));
        apply(&mut aggregate, rows(&[(100, 1)], Op::Delete));
        let third = aggregate.snapshot(&request(3, Some(1), true)).unwrap();
        assert_eq!(third.kind, StateKind::Changes);
        let at_3 = contents(&aggregate);

        // 3 completes; 4 extends it.
        apply(&mut aggregate, rows(&[(8, 1000), (9, 9)], Op::Delete));
        let fourth = aggregate.snapshot(&request(4, Some(3), true)).unwrap();
        let at_4 = contents(&aggregate);

        for (chain, expected) in [
            (vec![&full, &second], &at_2),
            (vec![&full, &third], &at_3),
            (vec![&full, &third, &fourth], &at_4),
        ] {
            let mut restored = count_and_max();
            let pieces: Vec<&[u8]> = chain.iter().map(|s| s.bytes.as_ref()).collect();
            restored.restore(&pieces, &everything).unwrap();
            assert_eq!(&contents(&restored), expected);
        }
        assert_eq!(at_3.len(), 50);
        assert!(at_4.contains(&"8 10 10 458".to_string()), "{at_4:?}");
        assert!(at_4.contains(&"9 9 9 459".to_string()), "{at_4:?}");
    }

    #[test]
    fn a_restored_state_is_extended_by_the_changes_since_the_restore() {
        let scope = KeyScope::everything();
        let mut before = count_and_max();
        let first: Vec<(i64, i64)> = (0..500).map(|i| (i % 50, i)).collect();
        apply(&mut before, rows(&first, Op::Insert));
        let full = before.snapshot(&SnapshotRequest::full(4)).unwrap();

        let mut aggregate = count_and_max();
        aggregate.restore(&[full.bytes.as_ref()], &scope).unwrap();
        aggregate.restored_from(4);
        let key_3: Vec<(i64, i64)> = first.iter().copied().filter(|r| r.0 == 3).collect();
        apply(&mut aggregate, rows(&key_3, Op::Delete));
        apply(&mut aggregate, rows(&[(7, 1000), (100, 1)], Op::Insert));
        let request = SnapshotRequest {
            checkpoint: 6,
            completed: Some(4),
            changes: true,
        };
        let changes = aggregate.snapshot(&request).unwrap();
        assert_eq!(changes.kind, StateKind::Changes);
        assert!(
            changes.bytes.len() * 10 < full.bytes.len(),
            "only keys 3, 7, 100"
        );

        let mut restored = count_and_max();
        let chain = [full.bytes.as_ref(), changes.bytes.as_ref()];
        restored.restore(&chain, &scope).unwrap();
        assert_eq!(contents(&restored), contents(&aggregate));
        assert!(!contents(&restored).iter().any(|g| g.starts_with("3 ")));
    }
}
