//! Unbounded `GROUP BY`: every chunk updates the groups it touches, then emits, per
//! changed group, `-U` old / `+U` new (`+I` for a new group, `-D` for a group whose last
//! row was retracted). In upsert mode the `-U` rows are left out.

use std::sync::Arc;

use arrow::array::{ArrayRef, UInt32Array};
use arrow::compute::{interleave, take};
use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use arrow::row::{RowConverter, SortField};
use datafusion_physical_expr::PhysicalExpr;

use super::{
    Accumulators, AggregateCall, Emitted, Slots, open_snapshot, signs_of, snapshot_writer,
};
use crate::Result;
use crate::chunk::{Chunk, Op};
use crate::operators::group_keys::GroupKeys;
use crate::operators::{Operator, evaluate};
use crate::partition::{KeyScope, key_groups};

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
    slots: Slots,
    emit_update_before: bool,
    schema: SchemaRef,
    max_parallelism: usize,
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
            slots: Slots::default(),
            emit_update_before,
            schema,
            max_parallelism,
        })
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
    fn snapshot(&mut self) -> Result<Vec<u8>> {
        let live: Vec<u32> = (0..self.slots.len as u32)
            .filter(|g| self.row_counts[*g as usize] > 0)
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
        out.u64(live.len() as u64);
        for (group, key_group) in live.iter().zip(key_groups) {
            out.bytes(self.group_keys.key(*group))
                .u64(key_group as u64)
                .i64(self.row_counts[*group as usize]);
            self.accumulators.save(*group, &mut out);
        }
        Ok(out.finish())
    }

    fn restore(&mut self, snapshots: &[&[u8]], scope: &KeyScope) -> Result<()> {
        for snapshot in snapshots {
            let mut input = open_snapshot(snapshot, "a GROUP BY")?;
            for _ in 0..input.count(24)? {
                let key = input.bytes()?;
                let key_group = input.u64()? as usize;
                let rows = input.i64()?;
                let group = self.insert_group(self.group_keys.hash(key), key);
                self.row_counts[group as usize] = rows;
                self.accumulators.load(group, &mut input)?;
                if !self.keys.is_empty() && !scope.owns(key_group) {
                    // Another subtask owns this key now.
                    self.remove_group(group);
                }
            }
        }
        Ok(())
    }

    fn process(&mut self, chunk: Chunk, out: &mut Vec<Chunk>) -> Result<()> {
        let key_arrays = self
            .keys
            .iter()
            .map(|k| evaluate(k, chunk.rows()))
            .collect::<Result<Vec<_>>>()?;
        let rows = match self.keys.is_empty() {
            true => None,
            false => Some(self.key_codec.convert_columns(&key_arrays)?),
        };
        let mut signs = signs_of(&chunk);
        let mut group_ids = Vec::with_capacity(chunk.num_rows());
        let mut touched: Vec<u32> = Vec::new();
        let mut existed: Vec<bool> = Vec::new();
        for (i, sign) in signs.iter_mut().enumerate() {
            let key = rows.as_ref().map_or(&[][..], |r| r.row(i).data());
            let hash = self.group_keys.hash(key);
            let group = match self.group_keys.find(hash, key) {
                Some(g) => g,
                None if *sign < 0 => {
                    // A retraction of a group never seen: nothing to take back.
                    *sign = 0;
                    group_ids.push(0);
                    continue;
                }
                None => self.insert_group(hash, key),
            };
            if !self.touched_mark[group as usize] {
                self.touched_mark[group as usize] = true;
                touched.push(group);
                existed.push(self.row_counts[group as usize] > 0);
            }
            group_ids.push(group);
        }
        if touched.is_empty() {
            return Ok(());
        }
        let before_groups: Vec<u32> = touched
            .iter()
            .zip(&existed)
            .filter(|(_, e)| **e)
            .map(|(g, _)| *g)
            .collect();
        let before = self.accumulators.evaluate(&before_groups)?;
        self.accumulators.update(chunk.rows(), &group_ids, &signs)?;
        for (g, s) in group_ids.iter().zip(&signs) {
            self.row_counts[*g as usize] += *s as i64;
        }
        let after_groups: Vec<u32> = touched
            .iter()
            .copied()
            .filter(|g| self.row_counts[*g as usize] > 0)
            .collect();
        let after = self.accumulators.evaluate(&after_groups)?;
        let before_rows = self.result_codec.convert_columns(&before)?;
        let after_rows = self.result_codec.convert_columns(&after)?;

        // (op, (0 = before / 1 = after, index)) and the touched position of each row.
        let mut emitted: Emitted = Vec::new();
        let mut key_positions: Vec<u32> = Vec::new();
        let (mut b, mut a) = (0usize, 0usize);
        for (position, (group, existed)) in touched.iter().zip(&existed).enumerate() {
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
        if !emitted.is_empty() {
            let keys = self.key_columns(&touched)?;
            let positions = UInt32Array::from(key_positions);
            let mut columns: Vec<ArrayRef> = keys
                .iter()
                .map(|k| take(k.as_ref(), &positions, None))
                .collect::<Result<_, _>>()?;
            let picks: Vec<(usize, usize)> = emitted.iter().map(|(_, p)| *p).collect();
            for (before_col, after_col) in before.iter().zip(&after) {
                columns.push(interleave(
                    &[before_col.as_ref(), after_col.as_ref()],
                    &picks,
                )?);
            }
            let rows = RecordBatch::try_new(self.schema.clone(), columns)?;
            out.push(Chunk::from_ops(
                rows,
                emitted.iter().map(|(op, _)| *op).collect(),
            ));
        }
        for group in touched {
            self.touched_mark[group as usize] = false;
            if self.row_counts[group as usize] <= 0 {
                self.remove_group(group);
            }
        }
        Ok(())
    }
}
