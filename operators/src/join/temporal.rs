//! Event-time temporal joins (`JOIN rates FOR SYSTEM_TIME AS OF o.order_time ON o.k = r.k`,
//! `rates` a versioned table: a primary key and an event-time attribute): each row of the
//! left input joins the version of the right row of its key that was valid at the row's
//! time, as Flink's temporal join does. Left rows wait until the watermark passes their
//! time (no later version of that time can come); then they are joined and emitted once
//! (append-only). Versions a future left row can no longer need (all but the latest one at
//! or before the watermark) are dropped.
//!
//! Each key of the versioned table has a slot holding its versions; with the LSM backend
//! the slots are a cache of an LSM store ([`cold`]): a key is read back when a version of
//! it arrives or a left row of it is joined.

mod cold;

use std::collections::HashSet;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, BooleanArray, Int64Array, UInt32Array, new_null_array};
use arrow::compute::{concat_batches, filter_record_batch, take_record_batch};
use arrow::datatypes::{DataType, SchemaRef};
use arrow::record_batch::RecordBatch;
use arrow::row::RowConverter;
use datafusion_physical_expr::PhysicalExpr;
use eddy_common::chunk::{Chunk, Op};
use eddy_common::event::Timestamp;
use eddy_common::state::{OperatorState, SnapshotRequest, StateReader, StateWriter};
use eddy_common::{EddyError, Result};

use crate::cold_slots::{self, ColdSlots};
use crate::group_keys::PartitionKeys;
use crate::partition::{KeyScope, key_groups};
use crate::state_context::StateContext;
use crate::stored_runs::{INLINE_LAYOUT, read_layout};
use crate::{Operator, evaluate, open_snapshot_versions, row_codec, versioned_snapshot};

/// The temporal join's snapshot format: 1 held the watermark, the left rows waiting and
/// every key's versions; 2 says before the versions whether they follow or the runs of an
/// LSM store hold them.
pub(crate) const SNAPSHOT_VERSION: u64 = 2;

/// What a temporal join is, as planned.
#[derive(Debug, Clone)]
pub struct TemporalJoinSpec {
    /// The key expressions over each input's rows (left, right), pairwise equal.
    pub keys: [Vec<Arc<dyn PhysicalExpr>>; 2],
    /// The keys' types.
    pub key_types: Vec<DataType>,
    /// Each input's rows.
    pub schemas: [SchemaRef; 2],
    /// Each input's event-time column: a left row's time, a right row's version time.
    pub times: [usize; 2],
    /// The rest of the join condition, over the joined rows.
    pub filter: Option<Arc<dyn PhysicalExpr>>,
    /// A LEFT JOIN: a left row without a valid version is emitted padded.
    pub left_outer: bool,
    /// The joined rows: the left input's columns, then the right's.
    pub schema: SchemaRef,
}

/// One version of a key's right row: from `time` on, `row` (an arena span; `None`: the key
/// was deleted).
#[derive(Debug, Clone, Copy)]
struct Version {
    time: Timestamp,
    row: Option<(u32, u32)>,
}

/// A temporal join of one subtask; input 0 is the left side, input 1 the versioned table.
#[derive(Debug)]
pub struct TemporalJoin {
    spec: TemporalJoinSpec,
    key_codec: RowConverter,
    right_codec: RowConverter,
    /// Left rows waiting for the watermark to pass their time, each batch with its
    /// earliest time (a batch with none due is not looked at).
    pending: Vec<(RecordBatch, Timestamp)>,
    /// The versioned table's keys in memory, a slot each.
    keys: PartitionKeys,
    /// Per slot: its key's versions, in time order.
    versions: Vec<Vec<Version>>,
    /// Slots holding more than one version (the only ones a watermark can prune).
    prunable: HashSet<u32>,
    arena: Vec<u8>,
    garbage: usize,
    watermark: Timestamp,
    max_parallelism: usize,
    /// The keys in an LSM store, with the LSM backend.
    cold: Option<ColdSlots>,
    /// Where the files of restored snapshots are.
    restored_files: std::path::PathBuf,
}

impl TemporalJoin {
    /// A temporal join as `spec` says, its state split into `max_parallelism` key groups.
    pub fn new(spec: TemporalJoinSpec, max_parallelism: usize) -> Result<Self> {
        let key_codec = crate::key_codec(&spec.key_types)?;
        let right_codec = row_codec(&spec.schemas[1])?;
        let keys = PartitionKeys::new(spec.keys[1].clone(), &spec.key_types)?;
        Ok(TemporalJoin {
            spec,
            key_codec,
            right_codec,
            pending: Vec::new(),
            keys,
            versions: Vec::new(),
            prunable: HashSet::new(),
            arena: Vec::new(),
            garbage: 0,
            watermark: Timestamp::MIN,
            max_parallelism,
            cold: None,
            restored_files: std::path::PathBuf::new(),
        })
    }

    /// Keeps versions where `context` says: with the LSM backend, the keys beyond its
    /// memory in an LSM store (the left rows waiting for the watermark stay in memory).
    pub fn with_state(mut self, context: &StateContext) -> Result<Self> {
        self.restored_files = context.restored.clone();
        if context.is_lsm() {
            self.cold = Some(ColdSlots::new(context, self.keys.len())?);
        }
        Ok(self)
    }

    fn times(&self, input: usize, rows: &RecordBatch) -> Result<Int64Array> {
        crate::epoch_millis(rows.column(self.spec.times[input]).as_ref())
    }

    /// The keys of `rows` of input `input`, encoded, with their key groups when the keys
    /// may be in a store (empty otherwise).
    fn key_rows(&self, input: usize, rows: &RecordBatch) -> Result<(arrow::row::Rows, Vec<usize>)> {
        let keys = self.spec.keys[input]
            .iter()
            .map(|k| evaluate(k, rows))
            .collect::<Result<Vec<_>>>()?;
        let groups = match self.cold {
            Some(_) => key_groups(&keys, self.max_parallelism)?,
            None => Vec::new(),
        };
        Ok((self.key_codec.convert_columns(&keys)?, groups))
    }

    /// Adds the versions a chunk of the versioned table makes: an insert or update from its
    /// time on, a deletion (its key gone) from its time on.
    fn add_versions(&mut self, chunk: &Chunk) -> Result<()> {
        let rows = chunk.rows();
        let times = self.times(1, rows)?;
        let (keys, groups) = self.key_rows(1, rows)?;
        let encoded = self.right_codec.convert_columns(rows.columns())?;
        for i in 0..rows.num_rows() {
            let op = chunk.op(i);
            if op == Op::UpdateBefore || times.is_null(i) {
                // The update's new row follows; a version without a time is never valid.
                continue;
            }
            let row = match op {
                Op::Delete => None,
                _ => {
                    let bytes = encoded.row(i);
                    let start = self.arena.len() as u32;
                    self.arena.extend_from_slice(bytes.data());
                    Some((start, bytes.data().len() as u32))
                }
            };
            let version = Version {
                time: times.value(i),
                row,
            };
            let key_group = groups.get(i).map_or(0, |g| *g as u16);
            let slot = self.slot_for(keys.row(i).data(), key_group)?;
            let list = &mut self.versions[slot as usize];
            let at = list.partition_point(|v| v.time <= version.time);
            list.insert(at, version);
            if list.len() > 1 {
                self.prunable.insert(slot);
            }
            if let Some(cold) = &mut self.cold {
                cold.touched(slot);
            }
        }
        Ok(())
    }

    /// The slot of `key` (of `key_group`): in memory, read back from the store, or new.
    fn slot_for(&mut self, key: &[u8], key_group: u16) -> Result<u32> {
        if let Some(slot) = self.find_or_load(key, key_group)? {
            return Ok(slot);
        }
        let slot = self.new_slot(key);
        if let Some(cold) = &mut self.cold {
            cold.placed(slot, key_group, false);
        }
        Ok(slot)
    }

    /// The slot of `key` (of `key_group`) in memory or read back from the store, if it has
    /// versions.
    fn find_or_load(&mut self, key: &[u8], key_group: u16) -> Result<Option<u32>> {
        match self.keys.find(key) {
            Some(slot) => Ok(Some(slot)),
            None => cold_slots::load(self, key, key_group, None),
        }
    }

    /// A slot for `key`, which has none, with no versions.
    fn new_slot(&mut self, key: &[u8]) -> u32 {
        let (slot, grown) = self.keys.insert(key);
        if grown {
            self.versions.resize_with(self.keys.len(), Vec::new);
            if let Some(cold) = &mut self.cold {
                cold.resize(self.keys.len());
            }
        }
        slot
    }

    /// Frees `slot` and its versions.
    fn release(&mut self, slot: u32) {
        let list = std::mem::take(&mut self.versions[slot as usize]);
        self.garbage += list
            .iter()
            .filter_map(|v| v.row)
            .map(|r| r.1 as usize)
            .sum::<usize>();
        self.prunable.remove(&slot);
        self.keys.release(slot);
    }

    /// With the LSM backend: reads back the keys of left rows (`keys`, of `groups`) that
    /// are not in memory.
    fn load_keys_of(&mut self, keys: &arrow::row::Rows, groups: &[usize]) -> Result<()> {
        for (key, key_group) in keys.iter().zip(groups) {
            self.find_or_load(key.data(), *key_group as u16)?;
        }
        Ok(())
    }

    /// The earliest time of left rows (a row without one is due at once).
    fn earliest(&self, rows: &RecordBatch) -> Result<Timestamp> {
        let times = self.times(0, rows)?;
        Ok(match times.null_count() {
            0 => arrow::compute::min(&times).unwrap_or(Timestamp::MAX),
            _ => Timestamp::MIN,
        })
    }

    /// Queues left rows until the watermark passes their time.
    fn wait(&mut self, rows: RecordBatch) -> Result<()> {
        if rows.num_rows() > 0 {
            let earliest = self.earliest(&rows)?;
            self.pending.push((rows, earliest));
        }
        Ok(())
    }

    /// Joins the pending left rows whose time the watermark has passed.
    fn emit_through(&mut self, watermark: Timestamp, out: &mut Vec<Chunk>) -> Result<()> {
        let mut still_pending = Vec::new();
        let mut ready = Vec::new();
        for (batch, earliest) in std::mem::take(&mut self.pending) {
            if earliest > watermark {
                still_pending.push((batch, earliest));
                continue;
            }
            let times = self.times(0, &batch)?;
            let due: BooleanArray = times
                .iter()
                .map(|t| Some(t.is_none_or(|t| t <= watermark)))
                .collect();
            ready.push(filter_record_batch(&batch, &due)?);
            let later = arrow::compute::not(&due)?;
            let rest = filter_record_batch(&batch, &later)?;
            if rest.num_rows() > 0 {
                let earliest = self.earliest(&rest)?;
                still_pending.push((rest, earliest));
            }
        }
        self.pending = still_pending;
        let ready = concat_batches(&self.spec.schemas[0], &ready)?;
        if ready.num_rows() == 0 {
            return Ok(());
        }
        // Key groups come only with a store: its keys are read back first.
        let (keys, groups) = self.key_rows(0, &ready)?;
        self.load_keys_of(&keys, &groups)?;
        if let Some(joined) = self.join_rows(&ready, &keys)? {
            out.push(Chunk::inserts(joined));
        }
        Ok(())
    }

    /// Each of `left` (its keys `keys`) joined with the version of its key valid at its
    /// time.
    fn join_rows(
        &self,
        left: &RecordBatch,
        keys: &arrow::row::Rows,
    ) -> Result<Option<RecordBatch>> {
        let times = self.times(0, left)?;
        let (mut matched, mut right_rows) = (Vec::new(), Vec::new());
        let parser = self.right_codec.parser();
        for i in 0..left.num_rows() {
            if times.is_null(i) {
                continue;
            }
            let Some(slot) = self.keys.find(keys.row(i).data()) else {
                continue;
            };
            let versions = &self.versions[slot as usize];
            let at = versions.partition_point(|v| v.time <= times.value(i));
            if let Some(Version {
                row: Some((start, len)),
                ..
            }) = at.checked_sub(1).map(|v| versions[v])
            {
                matched.push(i as u32);
                let bytes = &self.arena[start as usize..(start + len) as usize];
                right_rows.push(parser.parse(bytes));
            }
        }
        let mut columns = take_record_batch(left, &UInt32Array::from(matched.clone()))?
            .columns()
            .to_vec();
        columns.extend(self.right_codec.convert_rows(right_rows)?);
        let joined = RecordBatch::try_new(self.spec.schema.clone(), columns)?;
        let (joined, matched) = match &self.spec.filter {
            None => (joined, matched),
            Some(filter) => {
                let keep = crate::true_only(&evaluate(filter, &joined)?)?;
                let kept = matched
                    .iter()
                    .zip(keep.values().iter())
                    .filter_map(|(m, k)| k.then_some(*m))
                    .collect();
                (filter_record_batch(&joined, &keep)?, kept)
            }
        };
        let mut parts = vec![joined];
        if self.spec.left_outer {
            let mut found = vec![false; left.num_rows()];
            for m in &matched {
                found[*m as usize] = true;
            }
            let unmatched: Vec<u32> = (0..left.num_rows() as u32)
                .filter(|i| !found[*i as usize])
                .collect();
            let rows = take_record_batch(left, &UInt32Array::from(unmatched))?;
            let mut columns = rows.columns().to_vec();
            for field in self.spec.schemas[1].fields() {
                columns.push(new_null_array(field.data_type(), rows.num_rows()));
            }
            parts.push(RecordBatch::try_new(self.spec.schema.clone(), columns)?);
        }
        let output = concat_batches(&self.spec.schema, &parts)?;
        Ok((output.num_rows() > 0).then_some(output))
    }

    /// Drops the versions no left row after `watermark` can need: all but the latest one
    /// at or before it (and that one too when it is a deletion).
    fn prune(&mut self, watermark: Timestamp) -> Result<()> {
        let mut settled = Vec::new();
        for slot in &self.prunable {
            let list = &mut self.versions[*slot as usize];
            let valid = list.partition_point(|v| v.time <= watermark);
            let mut drop = valid.saturating_sub(1);
            if valid > 0 && list[valid - 1].row.is_none() {
                drop = valid;
            }
            for version in list.drain(..drop) {
                if let Some((_, len)) = version.row {
                    self.garbage += len as usize;
                }
            }
            if drop > 0
                && let Some(cold) = &mut self.cold
            {
                cold.touched(*slot);
            }
            if list.len() <= 1 {
                settled.push(*slot);
            }
        }
        for slot in settled {
            self.prunable.remove(&slot);
            if self.versions[slot as usize].is_empty() {
                if let Some(cold) = &mut self.cold {
                    cold.removed(slot, self.keys.key(slot))?;
                }
                self.release(slot);
            }
        }
        if self.garbage > 1 << 20 && self.garbage * 2 > self.arena.len() {
            self.compact();
        }
        Ok(())
    }

    /// Copies the held versions into a new arena.
    fn compact(&mut self) {
        let mut arena = Vec::with_capacity(self.arena.len() - self.garbage);
        for list in &mut self.versions {
            for version in list.iter_mut() {
                if let Some((start, len)) = version.row {
                    let new_start = arena.len() as u32;
                    arena.extend_from_slice(&self.arena[start as usize..(start + len) as usize]);
                    version.row = Some((new_start, len));
                }
            }
        }
        self.arena = arena;
        self.garbage = 0;
    }

    /// Writes `slot`'s versions: how many, then each one's time and row (if any).
    fn write_versions(&self, slot: u32, out: &mut StateWriter) {
        let list = &self.versions[slot as usize];
        out.u64(list.len() as u64);
        for version in list {
            out.i64(version.time);
            match version.row {
                Some((start, len)) => {
                    out.u64(1)
                        .bytes(&self.arena[start as usize..(start + len) as usize]);
                }
                None => {
                    out.u64(0);
                }
            }
        }
    }

    /// Reads versions written by [`TemporalJoin::write_versions`]; their rows go into the
    /// arena when `keep` (garbage otherwise).
    fn read_versions(&mut self, input: &mut StateReader<'_>, keep: bool) -> Result<Vec<Version>> {
        let mut list = Vec::new();
        for _ in 0..input.count(2)? {
            let time = input.i64()?;
            let row = match input.u64()? {
                0 => None,
                _ => {
                    let bytes = input.bytes()?;
                    let start = self.arena.len() as u32;
                    self.arena.extend_from_slice(bytes);
                    if !keep {
                        self.garbage += bytes.len();
                    }
                    Some((start, bytes.len() as u32))
                }
            };
            list.push(Version { time, row });
        }
        Ok(list)
    }

    /// Puts `list` into a new slot for `key`.
    fn place_versions(&mut self, key: &[u8], list: Vec<Version>) -> u32 {
        let slot = self.new_slot(key);
        if list.len() > 1 {
            self.prunable.insert(slot);
        }
        self.versions[slot as usize] = list;
        slot
    }

    /// The slots holding versions.
    fn live_slots(&self) -> Vec<u32> {
        (0..self.versions.len() as u32)
            .filter(|s| !self.versions[*s as usize].is_empty())
            .collect()
    }

    /// Left rows waiting, and versions held.
    #[cfg(test)]
    fn held(&self) -> (usize, usize) {
        (
            self.pending.iter().map(|(b, _)| b.num_rows()).sum(),
            self.versions.iter().map(Vec::len).sum(),
        )
    }
}

impl Operator for TemporalJoin {
    fn process(&mut self, chunk: Chunk, out: &mut Vec<Chunk>) -> Result<()> {
        self.process_input(0, chunk, out)
    }

    fn process_input(&mut self, input: usize, chunk: Chunk, _out: &mut Vec<Chunk>) -> Result<()> {
        match input {
            0 if chunk.is_append_only() => self.wait(chunk.rows().clone()),
            0 => Err(EddyError::Internal(
                "a temporal join's left input must be append-only".into(),
            )),
            1 => {
                if let Some(cold) = &mut self.cold {
                    cold.next_chunk();
                }
                self.add_versions(&chunk)?;
                cold_slots::evict(self)
            }
            _ => Err(EddyError::Internal(format!(
                "a temporal join has two inputs, but rows came from input {input}"
            ))),
        }
    }

    fn on_watermark(&mut self, watermark: Timestamp, out: &mut Vec<Chunk>) -> Result<()> {
        if watermark <= self.watermark {
            return Ok(());
        }
        self.watermark = watermark;
        if let Some(cold) = &mut self.cold {
            cold.next_chunk();
        }
        self.emit_through(watermark, out)?;
        self.prune(watermark)?;
        cold_slots::evict(self)
    }

    fn snapshot(&mut self, _request: &SnapshotRequest) -> Result<OperatorState> {
        // Left rows wait a watermark's delay and versions are few per key: written whole.
        let mut out = versioned_snapshot(SNAPSHOT_VERSION);
        out.i64(self.watermark);
        self.write_pending(&mut out)?;
        if self.cold.is_some() {
            return cold_slots::snapshot(self, out);
        }
        out.u64(INLINE_LAYOUT);
        let held = self.live_slots();
        let groups = self.keys.key_groups(&held, self.max_parallelism)?;
        out.u64(held.len() as u64);
        for (slot, group) in held.into_iter().zip(groups) {
            out.bytes(self.keys.key(slot)).u64(group as u64);
            self.write_versions(slot, &mut out);
        }
        Ok(OperatorState::full(out.finish()))
    }

    fn restore(&mut self, snapshots: &[&[u8]], scope: &KeyScope) -> Result<()> {
        let mut watermark = None::<Timestamp>;
        let mut stores = Vec::new();
        for snapshot in snapshots {
            let what = "a temporal join";
            let (version, mut input) = open_snapshot_versions(snapshot, what, SNAPSHOT_VERSION)?;
            let w = input.i64()?;
            watermark = Some(watermark.map_or(w, |m| m.min(w)));
            self.read_pending(&mut input, scope)?;
            let layout = match version {
                2.. => input.u64()?,
                _ => INLINE_LAYOUT,
            };
            let inline = |input: &mut StateReader<'_>| self.read_inline_versions(input, scope);
            stores.extend(read_layout(layout, &mut input, what, inline)?);
        }
        if let Some(w) = watermark {
            self.watermark = self.watermark.max(w);
        }
        let restored = self.restored_files.clone();
        cold_slots::restore(self, &restored, stores, scope)
    }
}

impl TemporalJoin {
    /// Writes the left rows waiting, each with its key group.
    fn write_pending(&self, out: &mut StateWriter) -> Result<()> {
        let left_codec = row_codec(&self.spec.schemas[0])?;
        let pending = concat_batches(
            &self.spec.schemas[0],
            self.pending.iter().map(|(batch, _)| batch),
        )?;
        let keys = self.spec.keys[0]
            .iter()
            .map(|k| evaluate(k, &pending))
            .collect::<Result<Vec<ArrayRef>>>()?;
        let groups = key_groups(&keys, self.max_parallelism)?;
        let rows = left_codec.convert_columns(pending.columns())?;
        out.u64(pending.num_rows() as u64);
        for (row, group) in rows.iter().zip(groups) {
            out.u64(group as u64).bytes(row.data());
        }
        Ok(())
    }

    /// Reads the left rows [`TemporalJoin::write_pending`] wrote, keeping those `scope` owns.
    fn read_pending(&mut self, input: &mut StateReader<'_>, scope: &KeyScope) -> Result<()> {
        let left_codec = row_codec(&self.spec.schemas[0])?;
        let schema = &self.spec.schemas[0];
        match crate::read_owned_rows(input, &left_codec, schema, scope)? {
            Some(rows) => self.wait(rows),
            None => Ok(()),
        }
    }

    /// Reads every key's versions written inline, keeping the keys `scope` owns.
    fn read_inline_versions(
        &mut self,
        input: &mut StateReader<'_>,
        scope: &KeyScope,
    ) -> Result<()> {
        for _ in 0..input.count(3)? {
            let key = input.bytes()?;
            let group = input.u64()? as usize;
            // Another subtask owns a key now: its rows are garbage here.
            let owned = scope.owns(group);
            let list = self.read_versions(input, owned)?;
            if owned && !list.is_empty() {
                let slot = self.place_versions(key, list);
                // Onto the LSM backend: in memory at first, written when evicted.
                if let Some(cold) = &mut self.cold {
                    cold.placed(slot, group as u16, false);
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
