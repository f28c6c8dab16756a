//! Top-N and deduplication, as Flink's `ROW_NUMBER() OVER (PARTITION BY … ORDER BY …)`
//! filtered by its rank: per partition key, the rows whose rank falls in `[start, end]`.
//!
//! On a stream, each chunk updates the partitions it touches, then emits per partition the
//! difference between its ranked rows before and after: with the rank number in the
//! output, `-U`/`+U` per rank whose row changed (`-D`/`+I` where a rank empties or fills);
//! without it, `-D` for rows that left the top and `+I` for rows that entered it. Over an
//! append-only input only the rows that can still rank by `end` are held; over an updating
//! input every row is held, so a retracted top row is replaced by the next one.
//!
//! Over windows (the partition key holds a window's bounds), nothing is emitted until the
//! watermark passes the window's end; then its ranked rows are emitted once, as inserts,
//! and its state is dropped. Rows of a window already emitted are late and dropped.
//!
//! Deduplication is the same operator with `end = 1`, ordered by event time, with the tie
//! policy of keep-first or keep-last ([`Ties`]).
//!
//! With a state TTL (not over windows), a partition not written for the TTL is dropped
//! without emitting anything, as in Flink: a later row of its key starts it afresh.
//!
//! With the LSM backend, partitions beyond the memory budget live in an LSM store
//! ([`cold`]), also over windows: a window's stored partitions are read back when it fires.

mod cold;
mod partition;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, Int64Array, TimestampMillisecondArray};
use arrow::compute::SortOptions;
use arrow::datatypes::{DataType, SchemaRef};
use arrow::record_batch::RecordBatch;
use arrow::row::{RowConverter, Rows, SortField};
use datafusion_physical_expr::PhysicalExpr;
use eddy_common::chunk::{Chunk, Op};
use eddy_common::event::Timestamp;
use eddy_common::metrics::OperatorMetrics;
use eddy_common::state::{OperatorState, SnapshotRequest, StateReader};
use eddy_common::{EddyError, Result};

use self::partition::Partition;
pub use self::partition::Ties;
use crate::cold_slots::{self, ColdSlots, SlotState};
use crate::group_keys::PartitionKeys;
use crate::partition::KeyScope;
use crate::spilled_windows::{SpilledWindows, sortable, unsortable};
use crate::stored_runs::{self, INLINE_LAYOUT, RUNS_LAYOUT};
use crate::ttl::StateTtl;
use crate::{Operator, evaluate, open_snapshot_versions, versioned_snapshot};

/// The Top-N snapshot format: 2 says after the watermark whether each partition carries
/// the time it was last written (a state TTL's); 3 says then how the partitions are laid
/// out: in the snapshot, or in the runs of an LSM store it names; 4 lists before the
/// layout the windows whose partitions that store holds.
pub(crate) const SNAPSHOT_VERSION: u64 = 4;

/// One `ORDER BY` expression of a Top-N.
#[derive(Debug, Clone)]
pub struct SortKey {
    /// The expression, over the input rows.
    pub expr: Arc<dyn PhysicalExpr>,
    /// Its type.
    pub data_type: DataType,
    /// `DESC` and `NULLS FIRST`.
    pub options: SortOptions,
}

/// What the rank numbers of the output are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RankOutput {
    /// The query reads the rank: each output row carries its rank, and a row whose rank
    /// changes is updated.
    Number,
    /// The query drops the rank: only rows entering and leaving the top are emitted, with
    /// rank 0.
    Dropped,
}

/// A Top-N or deduplication, as planned.
#[derive(Debug, Clone)]
pub struct RankSpec {
    /// `PARTITION BY`, over the input rows.
    pub partition_keys: Vec<Arc<dyn PhysicalExpr>>,
    /// Their types.
    pub partition_types: Vec<DataType>,
    /// `ORDER BY`.
    pub order: Vec<SortKey>,
    /// The first rank kept (1 or more).
    pub start: u64,
    /// The last rank kept.
    pub end: u64,
    /// How rows tying on the `ORDER BY` are ordered.
    pub ties: Ties,
    /// Whether the output carries the rank.
    pub output: RankOutput,
    /// The input has inserts only.
    pub append_only_input: bool,
    /// Over windows: the input column holding each row's `window_end`.
    pub window_end: Option<usize>,
    /// The input rows.
    pub input_schema: SchemaRef,
    /// The output rows: the input's columns, then the rank.
    pub schema: SchemaRef,
    /// Milliseconds a partition lives after its last write, by the wall clock (`None`:
    /// for good); not over windows.
    pub state_ttl: Option<i64>,
}

/// A Top-N of one subtask.
#[derive(Debug)]
pub struct TopN {
    spec: RankSpec,
    keys: PartitionKeys,
    sort_codec: RowConverter,
    row_codec: RowConverter,
    partitions: Vec<Partition>,
    /// Over windows: each slot's window end, and the slots by window end.
    window_ends: Vec<Timestamp>,
    timers: BTreeMap<Timestamp, Vec<u32>>,
    watermark: Timestamp,
    /// Per slot, whether the chunk being processed touched it.
    touched_mark: Vec<bool>,
    metrics: Arc<OperatorMetrics>,
    max_parallelism: usize,
    /// When partitions were last written, with a state TTL.
    ttl: Option<StateTtl>,
    /// With the LSM backend: the partitions written to a store.
    cold: Option<ColdSlots>,
    /// Over windows, with the LSM backend: the windows whose partitions the store may hold
    /// (by [`sortable`] window end), which their firing reads back.
    spilled: SpilledWindows,
    /// A partition's key in the store, reused.
    store_key: Vec<u8>,
    /// Where a restore put the state files its snapshots refer to.
    restored_files: PathBuf,
}

/// Rows to emit, gathered before they are decoded into a chunk: each row's bytes in one
/// buffer, with its change and rank.
#[derive(Default)]
struct Emission {
    bytes: Vec<u8>,
    rows: Vec<(usize, usize)>,
    ops: Vec<Op>,
    ranks: Vec<i64>,
}

impl Emission {
    fn push(&mut self, op: Op, row: &[u8], rank: u64) {
        self.rows.push((self.bytes.len(), row.len()));
        self.bytes.extend_from_slice(row);
        self.ops.push(op);
        self.ranks.push(rank as i64);
    }
}

/// A partition's ranked rows before a chunk changed it: (rank, offset, length) into one
/// buffer.
type Ranked = Vec<(u64, usize, usize)>;

impl TopN {
    /// A Top-N as `spec` says, its keyed state split into `max_parallelism` key groups.
    pub fn new(
        spec: RankSpec,
        metrics: Arc<OperatorMetrics>,
        max_parallelism: usize,
    ) -> Result<Self> {
        if spec.start == 0 || spec.end < spec.start {
            return Err(EddyError::Plan(format!(
                "a Top-N keeps ranks {} to {}: ranks start at 1",
                spec.start, spec.end
            )));
        }
        let keys = PartitionKeys::new(spec.partition_keys.clone(), &spec.partition_types)?;
        let sort_codec = RowConverter::new(
            spec.order
                .iter()
                .map(|k| SortField::new_with_options(k.data_type.clone(), k.options))
                .collect(),
        )?;
        let row_codec = crate::row_codec(&spec.input_schema)?;
        let ttl = match spec.window_end {
            None => spec.state_ttl.map(StateTtl::new),
            Some(_) => None,
        };
        Ok(TopN {
            ttl,
            spec,
            keys,
            sort_codec,
            row_codec,
            partitions: Vec::new(),
            window_ends: Vec::new(),
            timers: BTreeMap::new(),
            watermark: Timestamp::MIN,
            touched_mark: Vec::new(),
            metrics,
            max_parallelism,
            cold: None,
            spilled: SpilledWindows::default(),
            store_key: Vec::new(),
            restored_files: PathBuf::new(),
        })
    }

    /// A new, empty slot for the partition with `key` (of `key_group`), which has none.
    fn new_slot(&mut self, key: &[u8], key_group: u16, window_end: Timestamp) -> u32 {
        let (slot, grown) = self.keys.insert(key);
        if grown {
            self.partitions.push(Partition::default());
            self.window_ends.push(0);
            self.touched_mark.push(false);
            if let Some(cold) = &mut self.cold {
                cold.resize(self.keys.len());
            }
        }
        if self.spec.window_end.is_some() {
            self.window_ends[slot as usize] = window_end;
            self.timers.entry(window_end).or_default().push(slot);
        }
        if let Some(cold) = &mut self.cold {
            cold.placed(slot, key_group, false);
        }
        slot
    }

    /// The slot of the partition with `key` (of `key_group`): in memory, read back from
    /// the store, or new when `create`.
    fn slot(
        &mut self,
        key: &[u8],
        key_group: u16,
        window_end: Timestamp,
        create: bool,
        now: Option<Timestamp>,
    ) -> Result<Option<u32>> {
        if let Some(slot) = self.keys.find(key) {
            return Ok(Some(slot));
        }
        let stored = match self.spec.window_end {
            None => cold_slots::load(self, key, key_group, now)?,
            Some(_) if self.spilled.holds(&sortable(window_end), key_group) => {
                let mut id = std::mem::take(&mut self.store_key);
                windowed_key(&mut id, window_end, key);
                let loaded = cold_slots::load(self, &id, key_group, now);
                self.store_key = id;
                loaded?
            }
            Some(_) => None,
        };
        if stored.is_some() {
            return Ok(stored);
        }
        Ok(create.then(|| self.new_slot(key, key_group, window_end)))
    }

    /// Drops `slot`'s partition for good, from memory and from the store.
    fn release(&mut self, slot: u32) -> Result<()> {
        if self.cold.is_some()
            && let (key, Some(cold)) = self.slot_key_and_store(slot)
        {
            cold.removed(slot, key)?;
        }
        self.free_slot(slot);
        Ok(())
    }

    /// Each row's window end (0 when not over windows).
    fn window_ends_of(&self, rows: &RecordBatch) -> Result<Vec<Timestamp>> {
        let Some(column) = self.spec.window_end else {
            return Ok(vec![0; rows.num_rows()]);
        };
        let ends = rows
            .column(column)
            .as_any()
            .downcast_ref::<TimestampMillisecondArray>()
            .ok_or_else(|| EddyError::Internal("window_end is not a TIMESTAMP(3)".into()))?;
        Ok(ends.values().to_vec())
    }

    /// The ranked rows of `partition` (those with ranks in range), copied into `buffer`.
    fn ranked(&self, partition: &Partition, buffer: &mut Vec<u8>) -> Ranked {
        let first = self.spec.start as usize - 1;
        let last = (self.spec.end as usize).min(partition.len());
        (first..last)
            .map(|i| {
                let row = partition.get(i).1;
                let at = buffer.len();
                buffer.extend_from_slice(row);
                (i as u64 + 1, at, row.len())
            })
            .collect()
    }

    /// Emits what changed between a partition's ranked rows `before` and `after`.
    fn emit_difference<'a>(
        &self,
        (before, before_bytes): (&Ranked, &'a [u8]),
        (after, after_bytes): (&Ranked, &'a [u8]),
        emission: &mut Emission,
    ) {
        let numbered = self.spec.output == RankOutput::Number;
        // With the rank in the output a row is (rank, row); without it, the row alone.
        let items = |ranked: &Ranked, bytes: &'a [u8]| {
            let mut items: Vec<(u64, &'a [u8])> = ranked
                .iter()
                .map(|(rank, start, len)| {
                    (
                        if numbered { *rank } else { 0 },
                        &bytes[*start..start + len],
                    )
                })
                .collect();
            items.sort_unstable();
            items
        };
        let (old, new) = (items(before, before_bytes), items(after, after_bytes));
        let (removed, added) = multiset_difference(&old, &new);
        let updated =
            |rank: u64, other: &[&(u64, &[u8])]| numbered && other.iter().any(|(r, _)| *r == rank);
        for (rank, row) in &removed {
            let op = match updated(*rank, &added) {
                true => Op::UpdateBefore,
                false => Op::Delete,
            };
            emission.push(op, row, *rank);
        }
        for (rank, row) in &added {
            let op = match updated(*rank, &removed) {
                true => Op::UpdateAfter,
                false => Op::Insert,
            };
            emission.push(op, row, *rank);
        }
    }

    /// Builds the output chunk of `emission`.
    fn chunk_of(&self, emission: Emission) -> Result<Option<Chunk>> {
        if emission.ops.is_empty() {
            return Ok(None);
        }
        let parser = self.row_codec.parser();
        let rows = emission
            .rows
            .iter()
            .map(|(start, len)| parser.parse(&emission.bytes[*start..start + len]));
        let mut columns = self.row_codec.convert_rows(rows)?;
        columns.push(Arc::new(Int64Array::from(emission.ranks)) as ArrayRef);
        let batch = RecordBatch::try_new(self.spec.schema.clone(), columns)?;
        Ok(Some(Chunk::from_ops(batch, emission.ops)))
    }

    /// Applies one row's change to its partition.
    /// Applies one change to a partition; returns whether its state changed (a row that
    /// cannot rank, or a retraction of a row never held, changes nothing).
    fn apply(&mut self, slot: u32, op: Op, sort_key: &[u8], row: &[u8]) -> bool {
        let partition = &mut self.partitions[slot as usize];
        if op.is_accumulate() {
            let position = partition.insert(sort_key, row, self.spec.ties);
            if self.spec.append_only_input {
                partition.truncate_past(self.spec.end);
                return (position as u64) < self.spec.end;
            }
            true
        } else {
            partition.retract(sort_key, row)
        }
    }

    /// Emits the ranked rows of the windows the watermark has passed, in the order they
    /// end, and drops them.
    /// Past a part's worth of partitions read back from the store
    /// ([`SpilledWindows::part`]) it stops, for the task to send them: the next call goes
    /// on ([`Operator::has_due_output`]).
    fn fire(&mut self, watermark: Timestamp, out: &mut Vec<Chunk>) -> Result<()> {
        let mut emission = Emission::default();
        let mut read_back = 0;
        while let Some(end) = self.next_window().filter(|end| end - 1 <= watermark) {
            if let Some(slots) = self.timers.remove(&end) {
                // These go first: dropping them deletes their stored entries, so that the
                // store's are the window's other partitions.
                self.emit_window(&slots, &mut emission)?;
            }
            while let Some(next) = self.spilled.next_group(&sortable(end)) {
                if read_back >= self.spilled.part {
                    break;
                }
                read_back += self.fire_stored(end, next, &mut emission, out)?;
            }
            if read_back >= self.spilled.part {
                break;
            }
        }
        out.extend(self.chunk_of(emission)?);
        Ok(())
    }

    /// The end of the window that fires first, in memory or in the store.
    fn next_window(&self) -> Option<Timestamp> {
        let in_memory = self.timers.keys().next().copied();
        let stored = self.spilled.first().and_then(unsortable);
        in_memory.into_iter().chain(stored).min()
    }

    /// Emits the ranked rows of the windowed partitions in `slots`, and drops them.
    fn emit_window(&mut self, slots: &[u32], emission: &mut Emission) -> Result<()> {
        let mut buffer = Vec::new();
        for slot in slots {
            buffer.clear();
            let ranked = self.ranked(&self.partitions[*slot as usize], &mut buffer);
            for (rank, start, len) in ranked {
                let rank = match self.spec.output {
                    RankOutput::Number => rank,
                    RankOutput::Dropped => 0,
                };
                emission.push(Op::Insert, &buffer[start..start + len], rank);
            }
            self.release(*slot)?;
        }
        Ok(())
    }

    /// Drops the partitions whose TTL passed by `now`.
    fn drop_expired(&mut self, now: Timestamp) -> Result<()> {
        let Some(ttl) = &mut self.ttl else {
            return Ok(());
        };
        for slot in ttl.expired(now) {
            self.release(slot)?;
        }
        Ok(())
    }

    /// Reads one partition of a snapshot (with its write time when `timed`), keeping it
    /// when `scope` owns its key group; `restored_at` starts the TTL clock of a partition
    /// written without one.
    fn load_partition(
        &mut self,
        input: &mut StateReader<'_>,
        scope: &KeyScope,
        timed: bool,
        restored_at: Timestamp,
    ) -> Result<()> {
        let key = input.bytes()?;
        let key_group = input.u64()? as usize;
        let window_end = input.i64()?;
        let written = match timed {
            true => input.i64()?,
            false => restored_at,
        };
        let rows = input.count(2)?;
        let keep = !self.keys.is_keyed() || scope.owns(key_group);
        let slot = match (keep, self.keys.find(key)) {
            (false, _) => None,
            (true, Some(slot)) => Some(slot),
            (true, None) => Some(self.new_slot(key, key_group as u16, window_end)),
        };
        for _ in 0..rows {
            let (sort_key, row) = (input.bytes()?, input.bytes()?);
            if let Some(slot) = slot {
                self.partitions[slot as usize].push(sort_key, row);
            }
        }
        if let (Some(slot), Some(ttl)) = (slot, &mut self.ttl) {
            ttl.write(slot, written);
        }
        Ok(())
    }
}

/// What `old` holds that `new` does not, and what `new` holds that `old` does not (both
/// sorted; a row held twice counts twice).
fn multiset_difference<'a, T: Ord>(old: &'a [T], new: &'a [T]) -> (Vec<&'a T>, Vec<&'a T>) {
    let (mut removed, mut added) = (Vec::new(), Vec::new());
    let (mut i, mut j) = (0, 0);
    while i < old.len() || j < new.len() {
        match (old.get(i), new.get(j)) {
            (Some(a), Some(b)) if a == b => {
                i += 1;
                j += 1;
            }
            (Some(a), Some(b)) if a < b => {
                removed.push(a);
                i += 1;
            }
            (Some(a), None) => {
                removed.push(a);
                i += 1;
            }
            (_, Some(b)) => {
                added.push(b);
                j += 1;
            }
            (None, None) => break,
        }
    }
    (removed, added)
}

/// The rows of a chunk in the forms the Top-N keeps: partition key, sort key and row, and
/// with a store, the key group of each row's partition.
struct Encoded {
    keys: Option<Rows>,
    key_groups: Vec<usize>,
    sort_keys: Rows,
    rows: Rows,
}

impl TopN {
    fn encode(&self, batch: &RecordBatch) -> Result<Encoded> {
        let max_parallelism = self.cold.as_ref().map(|_| self.max_parallelism);
        let (keys, key_groups) = self.keys.encode_with_key_groups(batch, max_parallelism)?;
        let sort_columns = self
            .spec
            .order
            .iter()
            .map(|k| evaluate(&k.expr, batch))
            .collect::<Result<Vec<_>>>()?;
        Ok(Encoded {
            keys,
            key_groups,
            sort_keys: self.sort_codec.convert_columns(&sort_columns)?,
            rows: self.row_codec.convert_columns(batch.columns())?,
        })
    }
}

impl Operator for TopN {
    fn process(&mut self, chunk: Chunk, out: &mut Vec<Chunk>) -> Result<()> {
        let now = self.ttl.as_ref().map(StateTtl::now);
        if let Some(now) = now {
            self.drop_expired(now)?;
        }
        if let Some(cold) = &mut self.cold {
            cold.next_chunk();
        }
        let encoded = self.encode(chunk.rows())?;
        let window_ends = self.window_ends_of(chunk.rows())?;
        let windowed = self.spec.window_end.is_some();
        let mut before: Vec<(u32, Ranked)> = Vec::new();
        let mut before_bytes = Vec::new();
        let mut late = 0u64;
        for (i, window_end) in window_ends.iter().enumerate() {
            if windowed && window_end - 1 <= self.watermark {
                late += 1;
                continue;
            }
            let key = encoded.keys.as_ref().map_or(&[][..], |k| k.row(i).data());
            let op = chunk.op(i);
            if let (Some(now), Some(ttl)) = (now, &self.ttl)
                && let Some(slot) = self.keys.find(key)
                && !self.touched_mark[slot as usize]
                && ttl.is_expired(slot, now)
            {
                // Expired, not yet dropped: it is not read again.
                self.release(slot)?;
            }
            let key_group = encoded.key_groups.get(i).map_or(0, |g| *g as u16);
            let create = op.is_accumulate();
            let Some(slot) = self.slot(key, key_group, *window_end, create, now)? else {
                continue;
            };
            if !windowed && !self.touched_mark[slot as usize] {
                self.touched_mark[slot as usize] = true;
                let ranked = self.ranked(&self.partitions[slot as usize], &mut before_bytes);
                before.push((slot, ranked));
            }
            let written = self.apply(
                slot,
                op,
                encoded.sort_keys.row(i).data(),
                encoded.rows.row(i).data(),
            );
            // Only a write renews the TTL (as Flink's, updated on create and write).
            if let (true, Some(ttl), Some(now)) = (written, &mut self.ttl, now) {
                ttl.write(slot, now);
            }
            if let (true, Some(cold)) = (written, &mut self.cold) {
                cold.touched(slot);
            }
        }
        OperatorMetrics::add(&self.metrics.late_records_dropped, late);
        let mut emission = Emission::default();
        let mut after_bytes = Vec::new();
        for (slot, ranked_before) in &before {
            self.touched_mark[*slot as usize] = false;
            after_bytes.clear();
            let ranked_after = self.ranked(&self.partitions[*slot as usize], &mut after_bytes);
            self.emit_difference(
                (ranked_before, &before_bytes),
                (&ranked_after, &after_bytes),
                &mut emission,
            );
            if self.partitions[*slot as usize].len() == 0 {
                self.release(*slot)?;
            }
        }
        out.extend(self.chunk_of(emission)?);
        cold_slots::evict(self)
    }

    fn on_watermark(&mut self, watermark: Timestamp, out: &mut Vec<Chunk>) -> Result<()> {
        if self.spec.window_end.is_some() {
            self.watermark = self.watermark.max(watermark);
            self.fire(self.watermark, out)?;
        }
        Ok(())
    }

    fn has_due_output(&self) -> bool {
        self.spec.window_end.is_some()
            && self
                .next_window()
                .is_some_and(|end| end - 1 <= self.watermark)
    }

    fn snapshot(&mut self, _request: &SnapshotRequest) -> Result<OperatorState> {
        if let Some(now) = self.ttl.as_ref().map(StateTtl::now) {
            self.drop_expired(now)?;
        }
        if self.cold.is_some() {
            let mut out = versioned_snapshot(SNAPSHOT_VERSION);
            out.i64(self.watermark).u64(self.ttl.is_some() as u64);
            self.stored_windows().write(&mut out);
            return cold_slots::snapshot(self, out);
        }
        let live = self.live_slots();
        let key_groups = self.keys.key_groups(&live, self.max_parallelism)?;
        let mut out = versioned_snapshot(SNAPSHOT_VERSION);
        out.i64(self.watermark).u64(self.ttl.is_some() as u64);
        SpilledWindows::default().write(&mut out);
        out.u64(INLINE_LAYOUT).u64(live.len() as u64);
        for (slot, key_group) in live.iter().zip(key_groups) {
            let partition = &self.partitions[*slot as usize];
            out.bytes(self.keys.key(*slot))
                .u64(key_group as u64)
                .i64(self.window_ends[*slot as usize]);
            if let Some(ttl) = &self.ttl {
                out.i64(ttl.written(*slot).unwrap_or(Timestamp::MIN));
            }
            out.u64(partition.len() as u64);
            for i in 0..partition.len() {
                let (sort_key, row) = partition.get(i);
                out.bytes(sort_key).bytes(row);
            }
        }
        Ok(OperatorState::full(out.finish()))
    }

    fn restore(&mut self, snapshots: &[&[u8]], scope: &KeyScope) -> Result<()> {
        let mut watermark: Option<Timestamp> = None;
        let mut stores = Vec::new();
        let restored_at = self.ttl.as_ref().map_or(0, StateTtl::now);
        for snapshot in snapshots {
            let (version, mut input) =
                open_snapshot_versions(snapshot, "a Top-N", SNAPSHOT_VERSION)?;
            let restored = input.i64()?;
            watermark = Some(watermark.map_or(restored, |w| w.min(restored)));
            let timed = version >= 2 && input.u64()? == 1;
            if version >= 4 {
                self.spilled.read(&mut input, scope)?;
            }
            let layout = match version {
                ..=2 => INLINE_LAYOUT,
                _ => input.u64()?,
            };
            if layout == RUNS_LAYOUT {
                stores.push(stored_runs::read_manifest(&mut input, "a Top-N")?);
                continue;
            }
            for _ in 0..input.count(4)? {
                self.load_partition(&mut input, scope, timed, restored_at)?;
            }
        }
        if let Some(watermark) = watermark {
            self.watermark = watermark;
        }
        let restored = self.restored_files.clone();
        cold_slots::restore(self, &restored, stores, scope)?;
        if self.cold.is_none() {
            // The stored windows were read into memory.
            self.spilled.clear();
        }
        Ok(())
    }
}

/// A windowed partition's key in the store, into `out`: its window's end ([`sortable`]),
/// then its partition key. A window's partitions of one key group are thus together in
/// the store, and windows in the order they fire.
fn windowed_key(out: &mut Vec<u8>, window_end: Timestamp, key: &[u8]) {
    out.clear();
    out.extend_from_slice(&sortable(window_end));
    out.extend_from_slice(key);
}

#[cfg(test)]
mod lsm_tests;
#[cfg(test)]
mod tests;
