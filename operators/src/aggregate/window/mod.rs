//! Window aggregates over a window TVF: one result row per window and key, emitted once
//! when the watermark passes the window's end. Rows whose window has already been emitted
//! are late: dropped and counted. Session windows merge as rows bridge their gaps.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, Int64Array, TimestampMillisecondArray};
use arrow::compute::cast;
use arrow::datatypes::{DataType, SchemaRef};
use arrow::record_batch::RecordBatch;
use arrow::row::{RowConverter, SortField};
use datafusion_physical_expr::PhysicalExpr;
use eddy_common::chunk::Chunk;
use eddy_common::event::Timestamp;
use eddy_common::metrics::OperatorMetrics;
use eddy_common::state::{OperatorState, SnapshotRequest};
use eddy_common::{EddyError, Result};
use hashbrown::HashMap;

use super::{Accumulators, AggregateCall, Slots, open_snapshot, signs_of, snapshot_writer};
use crate::group_keys::GroupKeys;
use crate::partition::{KeyScope, key_groups};
use crate::window_assign::{WindowKind, windows_of};
use crate::{Operator, evaluate};

/// Where the window bounds are, in the input and in the output.
#[derive(Debug, Clone)]
pub struct WindowColumns {
    /// Input column holding `window_start`.
    pub start: usize,
    /// Input column holding `window_end`.
    pub end: usize,
    /// For each grouping column of the output: `Some(i)` for the i-th key expression,
    /// `None` for `window_start` (when `is_start`) or `window_end`.
    pub layout: Vec<OutputColumn>,
}

/// One grouping column of a window aggregate's output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputColumn {
    /// The i-th key expression.
    Key(usize),
    /// The window's start.
    WindowStart,
    /// The window's end.
    WindowEnd,
}

/// What a window aggregate computes.
#[derive(Debug, Clone)]
pub struct WindowAggregateSpec {
    /// Grouping expressions other than the window bounds.
    pub keys: Vec<Arc<dyn PhysicalExpr>>,
    /// Their types.
    pub key_types: Vec<DataType>,
    /// Where the window bounds are.
    pub columns: WindowColumns,
    /// The gap, for session windows.
    pub session_gap: Option<i64>,
    /// Aggregate calls.
    pub calls: Vec<AggregateCall>,
    /// Output rows.
    pub schema: SchemaRef,
    /// Windows of processing time: each row is put into the windows of this kind that hold
    /// the wall-clock time it arrives at (the window columns it carries are ignored), and a
    /// window fires when the clock passes its end. `None`: windows of event time, as the
    /// rows' window columns say, fired by the watermark.
    pub processing_time: Option<WindowKind>,
}

/// A window aggregate of one subtask.
#[derive(Debug)]
pub struct WindowAggregate {
    keys: Vec<Arc<dyn PhysicalExpr>>,
    key_codec: Option<RowConverter>,
    columns: WindowColumns,
    session_gap: Option<i64>,
    accumulators: Accumulators,
    /// Aligned windows: (start, end, key) bytes → slot, all in one buffer.
    index: GroupKeys,
    /// Sessions: key bytes → the key's open session slots.
    sessions: HashMap<Box<[u8]>, Vec<u32>>,
    bounds: Vec<(Timestamp, Timestamp)>,
    /// Each session slot's key (an aligned slot's key is in `index`).
    session_keys: Vec<Box<[u8]>>,
    /// The open slots by window, in the order windows fire: (end, start) → slots.
    timers: BTreeMap<(Timestamp, Timestamp), Vec<u32>>,
    slots: Slots,
    /// Event time (or, on processing time, the wall-clock time) up to which windows fired.
    watermark: Timestamp,
    processing_time: Option<WindowKind>,
    /// The wall clock (replaced in tests).
    clock: fn() -> Timestamp,
    schema: SchemaRef,
    metrics: Arc<OperatorMetrics>,
    buffer: Vec<u8>,
    max_parallelism: usize,
}

impl WindowAggregate {
    /// A window aggregate grouping by its keys within windows (merging sessions when the
    /// spec has a session gap); keyed state is split into `max_parallelism` key groups.
    pub fn new(
        spec: WindowAggregateSpec,
        metrics: Arc<OperatorMetrics>,
        max_parallelism: usize,
    ) -> Result<Self> {
        let WindowAggregateSpec {
            keys,
            key_types,
            columns,
            session_gap,
            calls,
            schema,
            processing_time,
        } = spec;
        let key_codec = match key_types.is_empty() {
            true => None,
            false => Some(RowConverter::new(
                key_types.into_iter().map(SortField::new).collect(),
            )?),
        };
        Ok(WindowAggregate {
            keys,
            key_codec,
            columns,
            session_gap,
            accumulators: Accumulators::new(calls)?,
            index: GroupKeys::default(),
            sessions: HashMap::new(),
            bounds: Vec::new(),
            session_keys: Vec::new(),
            timers: BTreeMap::new(),
            slots: Slots::default(),
            watermark: Timestamp::MIN,
            processing_time,
            clock: crate::wall_clock,
            schema,
            metrics,
            buffer: Vec::new(),
            max_parallelism,
        })
    }

    /// The decoded key columns of `slots`.
    fn key_columns(&self, slots: &[u32]) -> Result<Vec<ArrayRef>> {
        match &self.key_codec {
            None => Ok(Vec::new()),
            Some(codec) => {
                let parser = codec.parser();
                let rows: Vec<_> = slots
                    .iter()
                    .map(|s| parser.parse(self.slot_key(*s)))
                    .collect();
                Ok(codec.convert_rows(rows)?)
            }
        }
    }

    /// The grouping key of an open slot.
    fn slot_key(&self, slot: u32) -> &[u8] {
        match self.session_gap {
            Some(_) => &self.session_keys[slot as usize],
            None => &self.index.key(slot)[WINDOW_BOUNDS..],
        }
    }

    /// A slot for a new window `[start, end)`, its timer set; its key is the caller's to
    /// record.
    fn open_slot(&mut self, start: Timestamp, end: Timestamp) -> u32 {
        let (slot, grown) = self.slots.acquire();
        if grown {
            self.accumulators.resize(self.slots.len);
            self.bounds.resize(self.slots.len, (0, 0));
            if self.session_gap.is_some() {
                self.session_keys.resize(self.slots.len, Box::default());
            }
        }
        self.bounds[slot as usize] = (start, end);
        self.timers.entry((end, start)).or_default().push(slot);
        slot
    }

    /// A slot for a new window `[start, end)` of `key`.
    fn new_slot(&mut self, start: Timestamp, end: Timestamp, key: &[u8]) -> u32 {
        if self.session_gap.is_some() {
            let slot = self.open_slot(start, end);
            self.session_keys[slot as usize] = key.into();
            return slot;
        }
        aligned_id(&mut self.buffer, start, end, key);
        let hash = self.index.hash(&self.buffer);
        let slot = self.open_slot(start, end);
        self.index.insert(hash, &self.buffer, slot);
        slot
    }

    /// Frees a slot whose timer is gone.
    fn release(&mut self, slot: u32) {
        match self.session_gap {
            Some(_) => self.session_keys[slot as usize] = Box::default(),
            None => self.index.remove(slot),
        }
        self.accumulators.reset(slot);
        self.slots.release(slot);
    }

    fn remove_timer(&mut self, start: Timestamp, end: Timestamp, slot: u32) {
        if let Some(slots) = self.timers.get_mut(&(end, start)) {
            slots.retain(|s| *s != slot);
            if slots.is_empty() {
                self.timers.remove(&(end, start));
            }
        }
    }

    fn aligned_slot(&mut self, start: Timestamp, end: Timestamp, key: &[u8]) -> u32 {
        aligned_id(&mut self.buffer, start, end, key);
        let hash = self.index.hash(&self.buffer);
        if let Some(slot) = self.index.find(hash, &self.buffer) {
            return slot;
        }
        let slot = self.open_slot(start, end);
        self.index.insert(hash, &self.buffer, slot);
        slot
    }

    /// The session slot for a row's proto-window `[start, end)`, merging every session of
    /// the key it overlaps. Merged-away slots are recorded in `redirect` and freed only
    /// after the chunk (rows already pointing at them are redirected).
    fn session_slot(
        &mut self,
        start: Timestamp,
        end: Timestamp,
        key: &[u8],
        redirect: &mut HashMap<u32, u32>,
        freed: &mut Vec<u32>,
    ) -> u32 {
        let open = self.sessions.get(key).cloned().unwrap_or_default();
        let overlapping: Vec<u32> = open
            .iter()
            .copied()
            .filter(|s| {
                let (s_start, s_end) = self.bounds[*s as usize];
                s_start <= end && start <= s_end
            })
            .collect();
        let Some((&target, others)) = overlapping.split_first() else {
            let slot = self.new_slot(start, end, key);
            self.sessions.entry(key.into()).or_default().push(slot);
            return slot;
        };
        let (mut lo, mut hi) = self.bounds[target as usize];
        self.remove_timer(lo, hi, target);
        lo = lo.min(start);
        hi = hi.max(end);
        for other in others {
            let (o_start, o_end) = self.bounds[*other as usize];
            self.remove_timer(o_start, o_end, *other);
            lo = lo.min(o_start);
            hi = hi.max(o_end);
            self.accumulators.merge(target, *other);
            self.accumulators.reset(*other);
            redirect.insert(*other, target);
            freed.push(*other);
        }
        if let Some(list) = self.sessions.get_mut(key) {
            list.retain(|s| !others.contains(s));
        }
        self.bounds[target as usize] = (lo, hi);
        self.timers.entry((hi, lo)).or_default().push(target);
        target
    }

    fn fire(&mut self, watermark: Timestamp, out: &mut Vec<Chunk>) -> Result<()> {
        let mut fired = Vec::new();
        while let Some(entry) = self.timers.first_entry() {
            let (end, start) = *entry.key();
            if end - 1 > watermark {
                break;
            }
            fired.extend(entry.remove().into_iter().map(|slot| (start, end, slot)));
        }
        if fired.is_empty() {
            return Ok(());
        }
        let slots: Vec<u32> = fired.iter().map(|f| f.2).collect();
        let results = self.accumulators.evaluate(&slots)?;
        let keys = self.key_columns(&slots)?;
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(self.schema.fields().len());
        for column in &self.columns.layout {
            let array: ArrayRef = match column {
                OutputColumn::Key(i) => keys[*i].clone(),
                OutputColumn::WindowStart => Arc::new(TimestampMillisecondArray::from_iter_values(
                    fired.iter().map(|f| f.0),
                )),
                OutputColumn::WindowEnd => Arc::new(TimestampMillisecondArray::from_iter_values(
                    fired.iter().map(|f| f.1),
                )),
            };
            columns.push(array);
        }
        columns.extend(results);
        let columns = columns
            .into_iter()
            .zip(self.schema.fields())
            .map(|(c, f)| {
                if c.data_type() == f.data_type() {
                    Ok(c)
                } else {
                    cast(&c, f.data_type())
                }
            })
            .collect::<Result<Vec<_>, _>>()?;
        out.push(Chunk::inserts(RecordBatch::try_new(
            self.schema.clone(),
            columns,
        )?));
        for (_, _, slot) in fired {
            if self.session_gap.is_some() {
                let key = &self.session_keys[slot as usize];
                if let Some(list) = self.sessions.get_mut(key.as_ref()) {
                    list.retain(|s| *s != slot);
                    if list.is_empty() {
                        self.sessions.remove(key.as_ref());
                    }
                }
            }
            self.release(slot);
        }
        Ok(())
    }
}

/// Bytes of an aligned window's bounds before its key in the index.
const WINDOW_BOUNDS: usize = 16;

/// Writes an aligned slot's identity, (start, end, key), into `buffer`.
fn aligned_id(buffer: &mut Vec<u8>, start: Timestamp, end: Timestamp, key: &[u8]) {
    buffer.clear();
    buffer.extend_from_slice(&start.to_be_bytes());
    buffer.extend_from_slice(&end.to_be_bytes());
    buffer.extend_from_slice(key);
}

fn millis(array: &ArrayRef) -> Result<Int64Array> {
    crate::epoch_millis(array.as_ref())
}

impl Operator for WindowAggregate {
    fn snapshot(&mut self, _request: &SnapshotRequest) -> Result<OperatorState> {
        // Windows are short-lived: their state is written whole every time.
        let open: Vec<(Timestamp, Timestamp, u32)> = self
            .timers
            .iter()
            .flat_map(|(&(end, start), slots)| slots.iter().map(move |slot| (end, start, *slot)))
            .collect();
        let slots: Vec<u32> = open.iter().map(|t| t.2).collect();
        let key_groups = match self.key_codec {
            None => vec![0; slots.len()],
            Some(_) => key_groups(&self.key_columns(&slots)?, self.max_parallelism)?,
        };
        let mut out = snapshot_writer(0);
        out.i64(self.watermark).u64(open.len() as u64);
        for ((end, start, slot), key_group) in open.into_iter().zip(key_groups) {
            out.bytes(self.slot_key(slot))
                .u64(key_group as u64)
                .i64(start)
                .i64(end);
            self.accumulators.save(slot, &mut out);
        }
        Ok(OperatorState::full(out.finish()))
    }

    fn restore(&mut self, snapshots: &[&[u8]], scope: &KeyScope) -> Result<()> {
        let mut watermark = None;
        let mut not_owned = Vec::new();
        for snapshot in snapshots {
            let (_, mut input) = open_snapshot(snapshot, "a window aggregate")?;
            let w = input.i64()?;
            watermark = Some(watermark.map_or(w, |m: Timestamp| m.min(w)));
            for _ in 0..input.count(40)? {
                let key = input.bytes()?;
                let key_group = input.u64()? as usize;
                let start = input.i64()?;
                let end = input.i64()?;
                let slot = self.new_slot(start, end, key);
                self.accumulators.load(slot, &mut input)?;
                if self.key_codec.is_some() && !scope.owns(key_group) {
                    // Another subtask owns this key now.
                    not_owned.push(slot);
                    continue;
                }
                if self.session_gap.is_some() {
                    self.sessions.entry(key.into()).or_default().push(slot);
                }
            }
        }
        if !not_owned.is_empty() {
            let dropped: hashbrown::HashSet<u32> = not_owned.iter().copied().collect();
            for slots in self.timers.values_mut() {
                slots.retain(|s| !dropped.contains(s));
            }
            self.timers.retain(|_, slots| !slots.is_empty());
            for slot in not_owned {
                self.release(slot);
            }
        }
        if let Some(w) = watermark {
            self.watermark = w;
        }
        Ok(())
    }

    fn process(&mut self, chunk: Chunk, _out: &mut Vec<Chunk>) -> Result<()> {
        if !chunk.is_append_only() {
            return Err(EddyError::Internal(
                "a window aggregate received updates; its input must be append-only".into(),
            ));
        }
        if let Some(kind) = self.processing_time {
            let mut windows = Vec::new();
            windows_of(kind, (self.clock)(), |start, end| {
                windows.push((start, end))
            });
            for (start, end) in windows {
                let n = chunk.num_rows();
                let starts = Int64Array::from_value(start, n);
                let ends = Int64Array::from_value(end, n);
                self.accumulate(&chunk, &starts, &ends)?;
            }
            return Ok(());
        }
        let starts = millis(chunk.rows().column(self.columns.start))?;
        let ends = millis(chunk.rows().column(self.columns.end))?;
        self.accumulate(&chunk, &starts, &ends)
    }

    fn on_watermark(&mut self, watermark: Timestamp, out: &mut Vec<Chunk>) -> Result<()> {
        // Processing-time windows ignore event time, also its end: as in Flink, the
        // windows still open when the input ends are not fired.
        if self.processing_time.is_none() && watermark > self.watermark {
            self.watermark = watermark;
            self.fire(watermark, out)?;
        }
        Ok(())
    }

    fn processing_timer(&self) -> Option<Timestamp> {
        self.processing_time?;
        self.timers.keys().next().map(|(end, _)| *end)
    }

    fn on_processing_time(&mut self, now: Timestamp, out: &mut Vec<Chunk>) -> Result<()> {
        if self.processing_time.is_some() && now - 1 > self.watermark {
            self.watermark = now - 1;
            self.fire(now - 1, out)?;
        }
        Ok(())
    }
}

impl WindowAggregate {
    /// Adds rows to the windows (`starts`, `ends`) each belongs to; rows of windows that
    /// already fired are dropped and counted.
    fn accumulate(&mut self, chunk: &Chunk, starts: &Int64Array, ends: &Int64Array) -> Result<()> {
        let key_arrays = self
            .keys
            .iter()
            .map(|k| evaluate(k, chunk.rows()))
            .collect::<Result<Vec<_>>>()?;
        let rows = match &self.key_codec {
            Some(codec) => Some(codec.convert_columns(&key_arrays)?),
            None => None,
        };
        let mut signs = signs_of(chunk);
        let mut groups = Vec::with_capacity(chunk.num_rows());
        let mut redirect = HashMap::new();
        let mut freed = Vec::new();
        let mut late = 0u64;
        for (i, sign) in signs.iter_mut().enumerate() {
            let (start, end) = (starts.value(i), ends.value(i));
            if end - 1 <= self.watermark {
                late += 1;
                *sign = 0;
                groups.push(0);
                continue;
            }
            let key = rows.as_ref().map_or(&[][..], |r| r.row(i).data());
            let slot = match self.session_gap {
                Some(_) => self.session_slot(start, end, key, &mut redirect, &mut freed),
                None => self.aligned_slot(start, end, key),
            };
            groups.push(slot);
        }
        if !redirect.is_empty() {
            for g in &mut groups {
                while let Some(target) = redirect.get(g) {
                    *g = *target;
                }
            }
        }
        if self.slots.len > 0 {
            self.accumulators.update(chunk.rows(), &groups, &signs)?;
        }
        for slot in freed {
            self.slots.release(slot);
        }
        OperatorMetrics::add(&self.metrics.late_records_dropped, late);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aggregate::AggregateKind;
    use arrow::datatypes::{Field, Schema, TimeUnit};
    use datafusion_physical_expr::expressions::Column;

    /// `COUNT(*)` per `k` in the windows given by each row's (start, end).
    fn counting() -> WindowAggregate {
        counting_on(None)
    }

    /// [`counting`], on processing time with windows of `kind` if given.
    fn counting_on(processing_time: Option<WindowKind>) -> WindowAggregate {
        let schema = Arc::new(Schema::new(vec![
            Field::new("k", DataType::Int64, true),
            Field::new(
                "window_start",
                DataType::Timestamp(TimeUnit::Millisecond, None),
                true,
            ),
            Field::new(
                "window_end",
                DataType::Timestamp(TimeUnit::Millisecond, None),
                true,
            ),
            Field::new("c", DataType::Int64, true),
        ]));
        let spec = WindowAggregateSpec {
            keys: vec![Arc::new(Column::new("k", 0))],
            key_types: vec![DataType::Int64],
            columns: WindowColumns {
                start: 1,
                end: 2,
                layout: vec![
                    OutputColumn::Key(0),
                    OutputColumn::WindowStart,
                    OutputColumn::WindowEnd,
                ],
            },
            session_gap: None,
            calls: vec![AggregateCall {
                kind: AggregateKind::Count,
                arg: Arc::new(Column::new("k", 0)),
                filter: None,
                input_type: DataType::Int64,
                output_type: DataType::Int64,
                append_only: true,
            }],
            schema,
            processing_time,
        };
        WindowAggregate::new(spec, Arc::new(OperatorMetrics::default()), 128).unwrap()
    }

    /// Rows (k, start, end).
    fn rows(rows: &[(i64, i64, i64)]) -> Chunk {
        let ts = |f: fn(&(i64, i64, i64)) -> i64| -> ArrayRef {
            Arc::new(TimestampMillisecondArray::from_iter_values(
                rows.iter().map(f),
            ))
        };
        let schema = Arc::new(Schema::new(vec![
            Field::new("k", DataType::Int64, true),
            Field::new("s", DataType::Timestamp(TimeUnit::Millisecond, None), true),
            Field::new("e", DataType::Timestamp(TimeUnit::Millisecond, None), true),
        ]));
        let keys: ArrayRef = Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.0)));
        Chunk::inserts(RecordBatch::try_new(schema, vec![keys, ts(|r| r.1), ts(|r| r.2)]).unwrap())
    }

    /// Every fired row as (k, start, end, count), sorted.
    fn fire_all(aggregate: &mut WindowAggregate) -> Vec<(i64, i64, i64, i64)> {
        let mut out = Vec::new();
        aggregate.on_watermark(Timestamp::MAX, &mut out).unwrap();
        fired(out)
    }

    /// The rows of `out` as (k, start, end, count), sorted.
    fn fired(out: Vec<Chunk>) -> Vec<(i64, i64, i64, i64)> {
        let mut fired = Vec::new();
        for chunk in out {
            let column = |i: usize| millis(chunk.rows().column(i)).unwrap();
            let (k, s, e, c) = (column(0), column(1), column(2), column(3));
            fired.extend(
                (0..chunk.num_rows()).map(|i| (k.value(i), s.value(i), e.value(i), c.value(i))),
            );
        }
        fired.sort();
        fired
    }

    #[test]
    fn windows_fire_in_end_order_and_split_by_key_group_on_restore() {
        let mut aggregate = counting();
        let mut input = Vec::new();
        for k in 0..300 {
            for w in 0..3 {
                for _ in 0..=(k % 3) {
                    input.push((k, w * 10, w * 10 + 10));
                }
            }
        }
        aggregate.process(rows(&input), &mut Vec::new()).unwrap();
        let mut out = Vec::new();
        aggregate.on_watermark(10, &mut out).unwrap();
        assert_eq!(
            out.iter().map(Chunk::num_rows).sum::<usize>(),
            300,
            "the first window"
        );
        let snapshot = aggregate.snapshot(&SnapshotRequest::full(1)).unwrap().bytes;
        let expected = fire_all(&mut aggregate);
        assert_eq!(expected.len(), 600);
        assert!(expected.iter().all(|(k, _, _, c)| *c == k % 3 + 1));

        let mut split = Vec::new();
        for subtask in 0..2 {
            let mut part = counting();
            let scope = KeyScope {
                subtask,
                parallelism: 2,
                max_parallelism: 128,
            };
            part.restore(&[&snapshot], &scope).unwrap();
            let fired = fire_all(&mut part);
            assert!(
                fired.len() > 100,
                "subtask {subtask} owns a share: {}",
                fired.len()
            );
            split.extend(fired);
        }
        split.sort();
        assert_eq!(split, expected);
    }

    thread_local! {
        static NOW: std::cell::Cell<Timestamp> = const { std::cell::Cell::new(0) };
    }

    fn test_clock() -> Timestamp {
        NOW.with(|now| now.get())
    }

    fn set_clock(now: Timestamp) {
        NOW.with(|cell| cell.set(now));
    }

    #[test]
    fn processing_time_windows_follow_the_clock_not_the_rows_or_the_watermark() {
        let mut aggregate = counting_on(Some(WindowKind::Hop { slide: 5, size: 10 }));
        aggregate.clock = test_clock;
        set_clock(12);
        // The rows' own window columns say 100..110: ignored.
        aggregate
            .process(rows(&[(1, 100, 110), (2, 100, 110)]), &mut Vec::new())
            .unwrap();
        set_clock(16);
        aggregate
            .process(rows(&[(1, 100, 110)]), &mut Vec::new())
            .unwrap();
        assert_eq!(
            aggregate.processing_timer(),
            Some(15),
            "the earliest window's end"
        );
        let mut out = Vec::new();
        aggregate.on_watermark(1_000, &mut out).unwrap();
        assert!(
            out.is_empty(),
            "event time does not fire processing-time windows"
        );
        aggregate.on_processing_time(15, &mut out).unwrap();
        assert_eq!(
            fired(std::mem::take(&mut out)),
            [(1, 5, 15, 1), (2, 5, 15, 1)]
        );
        assert_eq!(aggregate.processing_timer(), Some(20));
        aggregate.on_processing_time(21, &mut out).unwrap();
        assert_eq!(
            fired(std::mem::take(&mut out)),
            [(1, 10, 20, 2), (2, 10, 20, 1)]
        );
        assert_eq!(aggregate.processing_timer(), Some(25));
        // Rows arriving now belong to windows holding now: none is late.
        set_clock(21);
        aggregate
            .process(rows(&[(3, 0, 1)]), &mut Vec::new())
            .unwrap();
        aggregate.on_watermark(Timestamp::MAX, &mut out).unwrap();
        assert!(
            out.is_empty(),
            "the end of the input does not fire them (as in Flink)"
        );
        aggregate.on_processing_time(31, &mut out).unwrap();
        assert_eq!(fired(out), [(1, 15, 25, 1), (3, 15, 25, 1), (3, 20, 30, 1)]);
    }

    #[test]
    fn event_time_windows_have_no_processing_timer() {
        let mut aggregate = counting();
        aggregate
            .process(rows(&[(1, 0, 10)]), &mut Vec::new())
            .unwrap();
        assert_eq!(aggregate.processing_timer(), None);
        let mut out = Vec::new();
        aggregate.on_processing_time(i64::MAX, &mut out).unwrap();
        assert!(out.is_empty());
    }
}
