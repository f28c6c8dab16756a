//! OVER aggregates on event time, as Flink computes them: `agg(x) OVER (PARTITION BY k
//! ORDER BY rowtime ROWS BETWEEN n PRECEDING AND CURRENT ROW)` (or `RANGE BETWEEN INTERVAL
//! ... PRECEDING`, or `UNBOUNDED PRECEDING`). Every input row is emitted once, with the
//! aggregates of its frame, when the watermark passes its time: rows wait in their partition
//! until then and are taken in time order (rows of one time in arrival order). In `ROWS`
//! mode a row's frame is the `n` rows before it and itself; in `RANGE` mode it is every row
//! whose time is at most the interval before its own, rows of the same time included, so
//! they share their aggregates. Rows older than the watermark are late: dropped and counted.
//! The output is append-only: the input's columns, then one column per aggregate.
//!
//! With the LSM backend, partitions with no rows waiting beyond the memory budget live in
//! an LSM store ([`cold`]).

mod cold;

use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, TimestampMillisecondArray};
use arrow::compute::concat;
use arrow::datatypes::{DataType, SchemaRef};
use arrow::record_batch::RecordBatch;
use arrow::row::RowConverter;
use datafusion_physical_expr::PhysicalExpr;
use eddy_common::chunk::Chunk;
use eddy_common::event::Timestamp;
use eddy_common::metrics::OperatorMetrics;
use eddy_common::state::{OperatorState, SnapshotRequest, StateReader, StateWriter};
use eddy_common::{EddyError, Result};

use self::cold::read_waiting;
use super::{Accumulators, AggregateCall};
use crate::cold_slots::{self, ColdSlots};
use crate::group_keys::PartitionKeys;
use crate::partition::KeyScope;
use crate::stored_runs::{INLINE_LAYOUT, read_layout};
use crate::{Operator, open_snapshot_versions, versioned_snapshot};

/// The over-aggregate snapshot format: 2 lists after the watermark the partitions of an
/// LSM store with rows waiting, then says how the partitions are laid out: in the
/// snapshot, or in the runs of the LSM store it names.
pub(crate) const SNAPSHOT_VERSION: u64 = 2;

/// Which rows before the current one a frame holds (it always ends at the current row).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OverFrame {
    /// `ROWS BETWEEN n PRECEDING` (`None`: `UNBOUNDED PRECEDING`).
    Rows(Option<u64>),
    /// `RANGE BETWEEN INTERVAL ... PRECEDING`, in milliseconds (`None`: unbounded).
    Range(Option<i64>),
}

impl std::fmt::Display for OverFrame {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OverFrame::Rows(Some(n)) => write!(f, "ROWS {n} PRECEDING"),
            OverFrame::Rows(None) => f.write_str("ROWS UNBOUNDED PRECEDING"),
            OverFrame::Range(Some(ms)) => write!(f, "RANGE {ms} ms PRECEDING"),
            OverFrame::Range(None) => f.write_str("RANGE UNBOUNDED PRECEDING"),
        }
    }
}

/// An OVER aggregation, as planned.
#[derive(Debug, Clone)]
pub struct OverSpec {
    /// `PARTITION BY`, over the input rows.
    pub partition_keys: Vec<Arc<dyn PhysicalExpr>>,
    /// Their types.
    pub partition_types: Vec<DataType>,
    /// The input column holding the event time the rows are ordered by.
    pub time_column: usize,
    /// The frame.
    pub frame: OverFrame,
    /// The aggregates.
    pub calls: Vec<AggregateCall>,
    /// The input rows.
    pub input_schema: SchemaRef,
    /// The output rows: the input's columns, then the aggregates.
    pub schema: SchemaRef,
}

/// A row, encoded, with its time.
type TimedRow = (Timestamp, Box<[u8]>);

/// One partition: rows waiting for the watermark, and the rows of the current frame (in
/// time order; a frame unbounded in the past keeps none, its aggregates hold them all).
#[derive(Debug, Default)]
struct Partition {
    used: bool,
    pending: Vec<TimedRow>,
    frame: VecDeque<TimedRow>,
}

/// An OVER aggregation of one subtask.
#[derive(Debug)]
pub struct OverAggregate {
    spec: OverSpec,
    keys: PartitionKeys,
    row_codec: RowConverter,
    accumulators: Accumulators,
    partitions: Vec<Partition>,
    /// Partitions with rows waiting, by the earliest time they wait for.
    timers: BTreeMap<Timestamp, Vec<u32>>,
    watermark: Timestamp,
    metrics: Arc<OperatorMetrics>,
    max_parallelism: usize,
    /// With the LSM backend: the partitions written to a store.
    cold: Option<ColdSlots>,
    /// Where a restore finds the files its snapshots name.
    restored_files: PathBuf,
}

impl OverAggregate {
    /// An OVER aggregation as `spec` says, its keyed state split into `max_parallelism` key
    /// groups.
    pub fn new(
        spec: OverSpec,
        metrics: Arc<OperatorMetrics>,
        max_parallelism: usize,
    ) -> Result<Self> {
        let keys = PartitionKeys::new(spec.partition_keys.clone(), &spec.partition_types)?;
        let row_codec = crate::row_codec(&spec.input_schema)?;
        Ok(OverAggregate {
            accumulators: Accumulators::new(spec.calls.clone())?,
            spec,
            keys,
            row_codec,
            partitions: Vec::new(),
            timers: BTreeMap::new(),
            watermark: Timestamp::MIN,
            metrics,
            max_parallelism,
            cold: None,
            restored_files: PathBuf::new(),
        })
    }

    /// The slot of the partition with `key` (of `key_group`): in memory, read back from the
    /// store, or new.
    fn slot(&mut self, key: &[u8], key_group: u16) -> Result<u32> {
        if let Some(slot) = self.keys.find(key) {
            return Ok(slot);
        }
        if let Some(slot) = cold_slots::load(self, key, key_group, None)? {
            return Ok(slot);
        }
        let slot = self.new_slot(key);
        if let Some(cold) = &mut self.cold {
            cold.placed(slot, key_group, false);
        }
        Ok(slot)
    }

    /// A new, empty slot for the partition with `key`, which has none.
    fn new_slot(&mut self, key: &[u8]) -> u32 {
        let (slot, grown) = self.keys.insert(key);
        if grown {
            self.partitions.push(Partition::default());
            self.accumulators.resize(self.keys.len());
            if let Some(cold) = &mut self.cold {
                cold.resize(self.keys.len());
            }
        }
        self.partitions[slot as usize].used = true;
        slot
    }

    /// Frees `slot` and its state.
    fn release(&mut self, slot: u32) {
        self.accumulators.reset(slot);
        self.keys.release(slot);
        self.partitions[slot as usize] = Partition::default();
    }

    /// Decodes encoded rows into a batch of the input's schema.
    fn decode<'a>(&self, rows: impl Iterator<Item = &'a [u8]>) -> Result<RecordBatch> {
        let parser = self.row_codec.parser();
        let columns = self.row_codec.convert_rows(rows.map(|r| parser.parse(r)))?;
        Ok(RecordBatch::try_new(
            self.spec.input_schema.clone(),
            columns,
        )?)
    }

    /// Adds (`sign` 1) or takes back (`sign` -1) rows of `slot`'s frame.
    fn apply(&mut self, slot: u32, rows: &RecordBatch, sign: i8) -> Result<()> {
        let groups = vec![slot; rows.num_rows()];
        let signs = vec![sign; rows.num_rows()];
        self.accumulators.update(rows, &groups, &signs)
    }

    /// Takes back the frame's rows that the next row (at `time`, `adding` rows) pushes out.
    fn expire(&mut self, slot: u32, time: Timestamp, adding: usize) -> Result<()> {
        let frame = &mut self.partitions[slot as usize].frame;
        let expired: Vec<Box<[u8]>> = match self.spec.frame {
            OverFrame::Rows(Some(preceding)) => {
                let keep = preceding as usize + 1;
                let over = (frame.len() + adding).saturating_sub(keep).min(frame.len());
                frame.drain(..over).map(|(_, row)| row).collect()
            }
            OverFrame::Range(Some(interval)) => {
                let first_kept = frame.partition_point(|(t, _)| *t < time - interval);
                frame.drain(..first_kept).map(|(_, row)| row).collect()
            }
            OverFrame::Rows(None) | OverFrame::Range(None) => Vec::new(),
        };
        if !expired.is_empty() {
            let rows = self.decode(expired.iter().map(|r| &r[..]))?;
            self.apply(slot, &rows, -1)?;
        }
        Ok(())
    }

    /// Emits `slot`'s rows up to the watermark, in time order, with their frames'
    /// aggregates.
    fn emit_partition(
        &mut self,
        slot: u32,
        watermark: Timestamp,
        out: &mut Vec<Chunk>,
    ) -> Result<()> {
        let partition = &mut self.partitions[slot as usize];
        let (mut ready, waiting): (Vec<_>, Vec<_>) = partition
            .pending
            .drain(..)
            .partition(|(t, _)| *t <= watermark);
        partition.pending = waiting;
        if let Some(next) = partition.pending.iter().map(|(t, _)| *t).min() {
            self.timers.entry(next).or_default().push(slot);
        }
        if ready.is_empty() {
            return Ok(());
        }
        ready.sort_by_key(|(t, _)| *t);
        if let Some(cold) = &mut self.cold {
            cold.touched(slot);
        }
        let batch = self.decode(ready.iter().map(|(_, r)| &r[..]))?;
        let range = matches!(self.spec.frame, OverFrame::Range(_));
        let mut aggregates: Vec<Vec<ArrayRef>> = vec![Vec::new(); self.spec.calls.len()];
        let mut start = 0;
        while start < ready.len() {
            // A row, or in RANGE mode every row of its time (they share one frame).
            let time = ready[start].0;
            let end = match range {
                true => {
                    start
                        + ready[start..]
                            .iter()
                            .take_while(|(t, _)| *t == time)
                            .count()
                }
                false => start + 1,
            };
            self.expire(slot, time, end - start)?;
            self.apply(slot, &batch.slice(start, end - start), 1)?;
            let frame = &mut self.partitions[slot as usize].frame;
            if !matches!(
                self.spec.frame,
                OverFrame::Rows(None) | OverFrame::Range(None)
            ) {
                frame.extend(ready[start..end].iter().cloned());
            }
            let values = self.accumulators.evaluate(&[slot])?;
            for (column, value) in aggregates.iter_mut().zip(values) {
                column.extend(std::iter::repeat_n(value, end - start));
            }
            start = end;
        }
        let mut columns = batch.columns().to_vec();
        for column in aggregates {
            let parts: Vec<&dyn Array> = column.iter().map(|a| a.as_ref()).collect();
            columns.push(concat(&parts)?);
        }
        let rows = RecordBatch::try_new(self.spec.schema.clone(), columns)?;
        out.push(Chunk::inserts(rows));
        Ok(())
    }
}

fn write_rows<'a>(out: &mut StateWriter, rows: impl ExactSizeIterator<Item = &'a TimedRow>) {
    out.u64(rows.len() as u64);
    for (time, row) in rows {
        out.i64(*time).bytes(row);
    }
}

fn read_rows(input: &mut StateReader<'_>) -> Result<Vec<TimedRow>> {
    (0..input.count(2)?)
        .map(|_| Ok((input.i64()?, input.bytes()?.into())))
        .collect()
}

impl Operator for OverAggregate {
    fn process(&mut self, chunk: Chunk, _out: &mut Vec<Chunk>) -> Result<()> {
        let rows = chunk.rows();
        if let Some(cold) = &mut self.cold {
            cold.next_chunk();
        }
        let max_parallelism = self.cold.as_ref().map(|_| self.max_parallelism);
        let (keys, key_groups) = self.keys.encode_with_key_groups(rows, max_parallelism)?;
        let encoded = self.row_codec.convert_columns(rows.columns())?;
        let times = rows
            .column(self.spec.time_column)
            .as_any()
            .downcast_ref::<TimestampMillisecondArray>()
            .ok_or_else(|| EddyError::Internal("an OVER's time is not a TIMESTAMP(3)".into()))?
            .clone();
        let mut late = 0u64;
        for i in 0..chunk.num_rows() {
            if times.is_null(i) || times.value(i) <= self.watermark {
                late += 1;
                continue;
            }
            let time = times.value(i);
            let key = keys.as_ref().map_or(&[][..], |k| k.row(i).data());
            let key_group = key_groups.get(i).map_or(0, |g| *g as u16);
            let slot = self.slot(key, key_group)?;
            if let Some(cold) = &mut self.cold {
                cold.touched(slot);
            }
            let pending = &mut self.partitions[slot as usize].pending;
            if pending.iter().all(|(t, _)| *t > time) {
                self.timers.entry(time).or_default().push(slot);
            }
            self.partitions[slot as usize]
                .pending
                .push((time, encoded.row(i).data().into()));
        }
        OperatorMetrics::add(&self.metrics.late_records_dropped, late);
        cold_slots::evict(self)
    }

    fn on_watermark(&mut self, watermark: Timestamp, out: &mut Vec<Chunk>) -> Result<()> {
        if watermark <= self.watermark {
            return Ok(());
        }
        self.watermark = watermark;
        let mut due: Vec<u32> = Vec::new();
        while let Some(entry) = self.timers.first_entry() {
            if *entry.key() > watermark {
                break;
            }
            due.extend(entry.remove());
        }
        due.sort_unstable();
        due.dedup();
        for slot in due {
            self.emit_partition(slot, watermark, out)?;
        }
        Ok(())
    }

    fn snapshot(&mut self, _request: &SnapshotRequest) -> Result<OperatorState> {
        let mut out = versioned_snapshot(SNAPSHOT_VERSION);
        out.i64(self.watermark);
        self.write_waiting(&mut out);
        if self.cold.is_some() {
            return cold_slots::snapshot(self, out);
        }
        let live: Vec<u32> = (0..self.keys.len() as u32)
            .filter(|s| self.partitions[*s as usize].used)
            .collect();
        let key_groups = self.keys.key_groups(&live, self.max_parallelism)?;
        out.u64(INLINE_LAYOUT).u64(live.len() as u64);
        for (slot, key_group) in live.iter().zip(key_groups) {
            out.bytes(self.keys.key(*slot)).u64(key_group as u64);
            self.write_partition(*slot, &mut out);
        }
        Ok(OperatorState::full(out.finish()))
    }

    fn restore(&mut self, snapshots: &[&[u8]], scope: &KeyScope) -> Result<()> {
        let mut watermark: Option<Timestamp> = None;
        let mut stores = Vec::new();
        let mut waiting = Vec::new();
        for snapshot in snapshots {
            let (version, mut input) =
                open_snapshot_versions(snapshot, "an OVER aggregate", SNAPSHOT_VERSION)?;
            let restored = input.i64()?;
            watermark = Some(watermark.map_or(restored, |w| w.min(restored)));
            let layout = match version {
                1 => INLINE_LAYOUT,
                _ => {
                    waiting.extend(read_waiting(&mut input, scope)?);
                    input.u64()?
                }
            };
            let what = "an OVER aggregate";
            let inline = |input: &mut StateReader<'_>| self.restore_inline(input, scope);
            stores.extend(read_layout(layout, &mut input, what, inline)?);
        }
        if let Some(watermark) = watermark {
            self.watermark = watermark;
        }
        let restored = self.restored_files.clone();
        cold_slots::restore(self, &restored, stores, scope)?;
        self.load_waiting(waiting)
    }
}

impl OverAggregate {
    /// Writes `slot`'s partition: its waiting rows, its frame's rows, its aggregates.
    fn write_partition(&self, slot: u32, out: &mut StateWriter) {
        let partition = &self.partitions[slot as usize];
        write_rows(out, partition.pending.iter());
        write_rows(out, partition.frame.iter());
        self.accumulators.save(slot, out);
    }

    /// Reads a partition [`OverAggregate::write_partition`] wrote into `slot`, and sets
    /// its timer if rows wait.
    fn read_partition(&mut self, slot: u32, input: &mut StateReader<'_>) -> Result<()> {
        let (pending, frame) = (read_rows(input)?, read_rows(input)?);
        self.accumulators.load(slot, input)?;
        if let Some(first) = pending.iter().map(|(t, _)| *t).min() {
            self.timers.entry(first).or_default().push(slot);
        }
        let partition = &mut self.partitions[slot as usize];
        partition.pending.extend(pending);
        partition.frame.extend(frame);
        Ok(())
    }

    /// Restores the partitions a snapshot holds, keeping those `scope` owns.
    fn restore_inline(&mut self, input: &mut StateReader<'_>, scope: &KeyScope) -> Result<()> {
        for _ in 0..input.count(3)? {
            let key = input.bytes()?;
            let key_group = input.u64()? as usize;
            let owned = !self.keys.is_keyed() || scope.owns(key_group);
            let slot = match self.keys.find(key) {
                Some(slot) => slot,
                None => self.new_slot(key),
            };
            if let Some(cold) = &mut self.cold {
                cold.placed(slot, key_group as u16, false);
            }
            if owned {
                self.read_partition(slot, input)?;
                continue;
            }
            // Another subtask owns this key now.
            let (_, _) = (read_rows(input)?, read_rows(input)?);
            self.accumulators.load(slot, input)?;
            self.release(slot);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
