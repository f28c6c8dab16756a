//! OVER aggregates on event time, as Flink computes them: `agg(x) OVER (PARTITION BY k
//! ORDER BY rowtime ROWS BETWEEN n PRECEDING AND CURRENT ROW)` (or `RANGE BETWEEN INTERVAL
//! ... PRECEDING`, or `UNBOUNDED PRECEDING`). Every input row is emitted once, with the
//! aggregates of its frame, when the watermark passes its time: rows wait in their partition
//! until then and are taken in time order (rows of one time in arrival order). In `ROWS`
//! mode a row's frame is the `n` rows before it and itself; in `RANGE` mode it is every row
//! whose time is at most the interval before its own, rows of the same time included, so
//! they share their aggregates. Rows older than the watermark are late: dropped and counted.
//! The output is append-only: the input's columns, then one column per aggregate.

use std::collections::{BTreeMap, VecDeque};
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

use super::{Accumulators, AggregateCall};
use crate::group_keys::PartitionKeys;
use crate::partition::KeyScope;
use crate::{Operator, open_versioned_snapshot, versioned_snapshot};

/// The over-aggregate snapshot format.
pub(crate) const SNAPSHOT_VERSION: u64 = 1;

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
        })
    }

    /// The slot of the partition with `key`, created if new.
    fn slot(&mut self, key: &[u8]) -> u32 {
        if let Some(slot) = self.keys.find(key) {
            return slot;
        }
        let (slot, grown) = self.keys.insert(key);
        if grown {
            self.partitions.push(Partition::default());
            self.accumulators.resize(self.keys.len());
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
        let keys = self.keys.encode(rows)?;
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
            let slot = self.slot(key);
            let pending = &mut self.partitions[slot as usize].pending;
            if pending.iter().all(|(t, _)| *t > time) {
                self.timers.entry(time).or_default().push(slot);
            }
            self.partitions[slot as usize]
                .pending
                .push((time, encoded.row(i).data().into()));
        }
        OperatorMetrics::add(&self.metrics.late_records_dropped, late);
        Ok(())
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
        let live: Vec<u32> = (0..self.keys.len() as u32)
            .filter(|s| self.partitions[*s as usize].used)
            .collect();
        let key_groups = self.keys.key_groups(&live, self.max_parallelism)?;
        let mut out = versioned_snapshot(SNAPSHOT_VERSION);
        out.i64(self.watermark).u64(live.len() as u64);
        for (slot, key_group) in live.iter().zip(key_groups) {
            let partition = &self.partitions[*slot as usize];
            out.bytes(self.keys.key(*slot)).u64(key_group as u64);
            write_rows(&mut out, partition.pending.iter());
            write_rows(&mut out, partition.frame.iter());
            self.accumulators.save(*slot, &mut out);
        }
        Ok(OperatorState::full(out.finish()))
    }

    fn restore(&mut self, snapshots: &[&[u8]], scope: &KeyScope) -> Result<()> {
        let mut watermark: Option<Timestamp> = None;
        for snapshot in snapshots {
            let mut input =
                open_versioned_snapshot(snapshot, "an OVER aggregate", SNAPSHOT_VERSION)?;
            let restored = input.i64()?;
            watermark = Some(watermark.map_or(restored, |w| w.min(restored)));
            for _ in 0..input.count(3)? {
                let key = input.bytes()?;
                let key_group = input.u64()? as usize;
                let (pending, frame) = (read_rows(&mut input)?, read_rows(&mut input)?);
                let slot = self.slot(key);
                self.accumulators.load(slot, &mut input)?;
                if self.keys.is_keyed() && !scope.owns(key_group) {
                    // Another subtask owns this key now.
                    self.release(slot);
                    continue;
                }
                if let Some(first) = pending.iter().map(|(t, _)| *t).min() {
                    self.timers.entry(first).or_default().push(slot);
                }
                let partition = &mut self.partitions[slot as usize];
                partition.pending.extend(pending);
                partition.frame.extend(frame);
            }
        }
        if let Some(watermark) = watermark {
            self.watermark = watermark;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;

    use arrow::array::{AsArray, Int64Array};
    use arrow::datatypes::{Field, Int64Type, Schema, TimeUnit};
    use datafusion_physical_expr::expressions::Column;

    use super::*;
    use crate::aggregate::AggregateKind;
    use crate::partition::key_groups;

    /// `SUM(v)` per `k` over rows (k, ts, v) in `frame`.
    fn summing(frame: OverFrame) -> OverAggregate {
        let input = Arc::new(Schema::new(vec![
            Field::new("k", DataType::Int64, true),
            Field::new("ts", DataType::Timestamp(TimeUnit::Millisecond, None), true),
            Field::new("v", DataType::Int64, true),
        ]));
        let mut fields: Vec<Field> = input.fields().iter().map(|f| f.as_ref().clone()).collect();
        fields.push(Field::new("s", DataType::Int64, true));
        let spec = OverSpec {
            partition_keys: vec![Arc::new(Column::new("k", 0))],
            partition_types: vec![DataType::Int64],
            time_column: 1,
            frame,
            calls: vec![AggregateCall {
                kind: AggregateKind::Sum,
                arg: Arc::new(Column::new("v", 2)),
                filter: None,
                input_type: DataType::Int64,
                output_type: DataType::Int64,
                append_only: false,
            }],
            input_schema: input,
            schema: Arc::new(Schema::new(fields)),
        };
        OverAggregate::new(spec, Arc::new(OperatorMetrics::default()), 128).unwrap()
    }

    fn rows(op: &mut OverAggregate, rows: &[(i64, i64, i64)]) {
        let batch = RecordBatch::try_new(
            op.spec.input_schema.clone(),
            vec![
                Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.0))),
                Arc::new(TimestampMillisecondArray::from_iter_values(
                    rows.iter().map(|r| r.1),
                )),
                Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.2))),
            ],
        )
        .unwrap();
        op.process(Chunk::inserts(batch), &mut Vec::new()).unwrap();
    }

    /// (k, ts, v, sum) of each row emitted when the watermark reaches `watermark`.
    fn fire(op: &mut OverAggregate, watermark: Timestamp) -> Vec<(i64, i64, i64, i64)> {
        let mut out = Vec::new();
        op.on_watermark(watermark, &mut out).unwrap();
        let mut emitted = Vec::new();
        for chunk in out {
            let r = chunk.rows();
            let int = |c: usize, i: usize| r.column(c).as_primitive::<Int64Type>().value(i);
            let ts = r
                .column(1)
                .as_primitive::<arrow::datatypes::TimestampMillisecondType>();
            for i in 0..r.num_rows() {
                emitted.push((int(0, i), ts.value(i), int(2, i), int(3, i)));
            }
        }
        emitted.sort();
        emitted
    }

    #[test]
    fn rows_frames_take_the_preceding_rows_in_time_order_at_the_watermark() {
        let mut op = summing(OverFrame::Rows(Some(1)));
        rows(&mut op, &[(1, 30, 3), (1, 10, 1), (1, 20, 2), (2, 10, 100)]);
        assert!(fire(&mut op, 5).is_empty(), "nothing before its time");
        assert_eq!(
            fire(&mut op, 20),
            [(1, 10, 1, 1), (1, 20, 2, 3), (2, 10, 100, 100)]
        );
        rows(&mut op, &[(1, 15, 50)]);
        assert_eq!(op.metrics.late_records_dropped.load(Ordering::Relaxed), 1);
        assert_eq!(
            fire(&mut op, 100),
            [(1, 30, 3, 5)],
            "the frame carried over"
        );
    }

    #[test]
    fn range_frames_share_their_aggregates_among_rows_of_one_time() {
        let mut op = summing(OverFrame::Range(Some(10)));
        rows(
            &mut op,
            &[(1, 0, 1), (1, 10, 2), (1, 10, 4), (1, 11, 8), (1, 21, 16)],
        );
        assert_eq!(
            fire(&mut op, 100),
            [
                (1, 0, 1, 1),
                // 10 - 10 = 0: the row at 0 is still in the frame; both rows of 10 count.
                (1, 10, 2, 7),
                (1, 10, 4, 7),
                (1, 11, 8, 14),
                // 21 - 10 = 11: only the rows at 11 and 21.
                (1, 21, 16, 24),
            ]
        );
    }

    #[test]
    fn a_restored_state_continues_split_by_key_group() {
        let (mut whole, mut before) = (
            summing(OverFrame::Rows(None)),
            summing(OverFrame::Rows(None)),
        );
        let first: Vec<(i64, i64, i64)> = (0..40).map(|i| (i % 8, i, i)).collect();
        let second: Vec<(i64, i64, i64)> = (40..80).map(|i| (i % 8, i, i)).collect();
        rows(&mut whole, &first);
        rows(&mut before, &first);
        let mut expected = fire(&mut whole, 19);
        assert_eq!(fire(&mut before, 19), expected);
        rows(&mut whole, &second);
        expected = fire(&mut whole, 1000);
        let snapshot = before.snapshot(&SnapshotRequest::full(1)).unwrap();
        let mut got = Vec::new();
        for subtask in 0..2 {
            let mut half = summing(OverFrame::Rows(None));
            let scope = KeyScope {
                subtask,
                parallelism: 2,
                max_parallelism: 128,
            };
            half.restore(&[&snapshot.bytes], &scope).unwrap();
            let mine: Vec<_> = second
                .iter()
                .copied()
                .filter(|(k, _, _)| {
                    let keys: ArrayRef = Arc::new(Int64Array::from(vec![*k]));
                    scope.owns(key_groups(&[keys], 128).unwrap()[0])
                })
                .collect();
            rows(&mut half, &mine);
            got.extend(fire(&mut half, 1000));
        }
        got.sort();
        assert_eq!(
            got, expected,
            "pending rows and running sums survive the rescale"
        );
    }
}
