//! Window aggregates over a window TVF: one result row per window and key, emitted once
//! when the watermark passes the window's end. Rows whose window has already been emitted
//! are late: dropped and counted. Session windows merge as rows bridge their gaps.
//!
//! With the LSM backend ([`cold`]) the windows of aligned kinds (tumbling, hopping,
//! cumulating) keep the keys beyond the memory budget in an LSM store, read back when a
//! row of theirs arrives or when their window fires. Session windows keep each key's
//! sessions there, with a timer per session ([`session`]).

mod cold;
mod session;

use std::collections::BTreeMap;
use std::path::PathBuf;
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
use eddy_common::state::{OperatorState, SnapshotRequest, StateReader};
use eddy_common::{EddyError, Result};
use hashbrown::HashMap;
use session::{SessionKeys, SessionStore};

use super::{Accumulators, AggregateCall, Slots, open_snapshot, signs_of, snapshot_writer};
use crate::cold_slots::{self, ColdSlots};
use crate::group_keys::GroupKeys;
use crate::partition::{KeyScope, key_groups};
use crate::spilled_windows::{SpilledWindows, window_of, window_prefix};
use crate::state_context::StateContext;
use crate::stored_runs::{INLINE_LAYOUT, read_layout};
use crate::stored_timers::StoredTimers;
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
    /// Aligned windows: (end, start, key) bytes ([`aligned_id`]) → slot, all in one buffer.
    index: GroupKeys,
    /// Sessions: each key's open session slots.
    sessions: SessionKeys,
    bounds: Vec<(Timestamp, Timestamp)>,
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
    /// With the LSM backend (windows with keys): the store the keys beyond the memory
    /// budget are in (for sessions, a slot of it is a key with all its sessions).
    cold: Option<ColdSlots>,
    /// Sessions: where the store holds timers.
    stored_timers: StoredTimers,
    /// The windows whose keys the store may hold (by [`aligned_id`]'s window prefix).
    spilled: SpilledWindows,
    /// Where a restore finds the files its snapshots name.
    restored_files: PathBuf,
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
            sessions: SessionKeys::default(),
            bounds: Vec::new(),
            timers: BTreeMap::new(),
            slots: Slots::default(),
            watermark: Timestamp::MIN,
            processing_time,
            clock: crate::wall_clock,
            schema,
            metrics,
            buffer: Vec::new(),
            max_parallelism,
            cold: None,
            stored_timers: StoredTimers::new(session::TIMERS, "a session window aggregate"),
            spilled: SpilledWindows::default(),
            restored_files: PathBuf::new(),
        })
    }

    /// Keeps state where `context` says: with the LSM backend, the keys beyond its memory
    /// in an LSM store (windows without keys stay in memory).
    pub fn with_state(mut self, context: &StateContext) -> Result<Self> {
        self.restored_files = context.restored.clone();
        if context.is_lsm() && self.key_codec.is_some() {
            let slots = match self.session_gap {
                Some(_) => self.sessions.len(),
                None => self.slots.len,
            };
            self.cold = Some(ColdSlots::new(context, slots)?);
        }
        Ok(self)
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
            Some(_) => self.sessions.key_of(slot),
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
            match (&mut self.cold, self.session_gap) {
                (_, Some(_)) => self.sessions.grow_sessions(self.slots.len),
                (Some(cold), None) => cold.resize(self.slots.len),
                (None, None) => {}
            }
        }
        self.bounds[slot as usize] = (start, end);
        self.timers.entry((end, start)).or_default().push(slot);
        slot
    }

    /// A slot for a new aligned window `[start, end)` of `key`.
    fn new_slot(&mut self, start: Timestamp, end: Timestamp, key: &[u8]) -> u32 {
        aligned_id(&mut self.buffer, start, end, key);
        let hash = self.index.hash(&self.buffer);
        let slot = self.open_slot(start, end);
        self.index.insert(hash, &self.buffer, slot);
        slot
    }

    /// A slot for a new session `[start, end)` of `key` (of `key_group`).
    fn new_session(&mut self, start: Timestamp, end: Timestamp, key: &[u8], key_group: u16) -> u32 {
        let session = self.open_slot(start, end);
        let key_slot = match self.sessions.find(key) {
            Some(key_slot) => key_slot,
            None => {
                let (key_slot, grown) = self.sessions.insert(key);
                if let Some(cold) = &mut self.cold {
                    if grown {
                        cold.resize(self.sessions.len());
                    }
                    cold.placed(key_slot, key_group, false);
                }
                key_slot
            }
        };
        self.sessions.add(key_slot, session);
        session
    }

    /// Moves the least recently used keys out of memory while more than the budget allows
    /// are in it (with the LSM backend).
    fn evict(&mut self) -> Result<()> {
        match self.session_gap {
            Some(_) => cold_slots::evict(&mut SessionStore(self)),
            None => cold_slots::evict(self),
        }
    }

    /// Frees a slot whose timer is gone, and deletes what the store holds of it (of a
    /// session: its key's stored sessions, once it was the key's last).
    fn release(&mut self, slot: u32) -> Result<()> {
        if self.session_gap.is_some() {
            let (key_slot, last) = self.sessions.remove(slot);
            if let Some(cold) = &mut self.cold {
                match last {
                    true => cold.removed(key_slot, self.sessions.key(key_slot))?,
                    false => cold.touched(key_slot),
                }
            }
            if last {
                self.sessions.release(key_slot);
            }
            self.accumulators.reset(slot);
            self.slots.release(slot);
            return Ok(());
        }
        if let Some(cold) = &mut self.cold {
            cold.removed(slot, self.index.key(slot))?;
        }
        self.free_slot(slot);
        Ok(())
    }

    /// Frees an aligned window's slot whose timer is gone, leaving what the store holds of
    /// it.
    fn free_slot(&mut self, slot: u32) {
        self.index.remove(slot);
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

    /// The slot of `key`'s window `[start, end)`: the one in memory, one read back from the
    /// store (where keys of `key_group` are), or a new one.
    fn aligned_slot(
        &mut self,
        start: Timestamp,
        end: Timestamp,
        key: &[u8],
        key_group: u16,
    ) -> Result<u32> {
        aligned_id(&mut self.buffer, start, end, key);
        let hash = self.index.hash(&self.buffer);
        if let Some(slot) = self.index.find(hash, &self.buffer) {
            return Ok(slot);
        }
        if self.spilled.holds(&self.buffer[..WINDOW_BOUNDS], key_group) {
            let id = std::mem::take(&mut self.buffer);
            let loaded = cold_slots::load(self, &id, key_group, None);
            self.buffer = id;
            if let Some(slot) = loaded? {
                return Ok(slot);
            }
        }
        let slot = self.open_slot(start, end);
        self.index.insert(hash, &self.buffer, slot);
        if let Some(cold) = &mut self.cold {
            cold.placed(slot, key_group, false);
        }
        Ok(slot)
    }

    /// The session slot for a row's proto-window `[start, end)` of `key` (of
    /// `key_group`), merging every session of the key it overlaps. Merged-away slots are
    /// recorded in `redirect` and freed only after the chunk (rows already pointing at them
    /// are redirected).
    fn session_slot(
        &mut self,
        (start, end): (Timestamp, Timestamp),
        (key, key_group): (&[u8], u16),
        redirect: &mut HashMap<u32, u32>,
        freed: &mut Vec<u32>,
    ) -> Result<u32> {
        let key_slot = match self.sessions.find(key) {
            Some(key_slot) => Some(key_slot),
            None => self.load_sessions(key, key_group)?,
        };
        let open = key_slot.map_or_else(Vec::new, |k| self.sessions.sessions(k).to_vec());
        let overlapping: Vec<u32> = open
            .iter()
            .copied()
            .filter(|s| {
                let (s_start, s_end) = self.bounds[*s as usize];
                s_start <= end && start <= s_end
            })
            .collect();
        let Some((&target, others)) = overlapping.split_first() else {
            return Ok(self.new_session(start, end, key, key_group));
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
            // The target stays: the key keeps a session.
            self.sessions.remove(*other);
        }
        self.bounds[target as usize] = (lo, hi);
        self.timers.entry((hi, lo)).or_default().push(target);
        Ok(target)
    }

    /// Emits the windows that end by `watermark`, in the order they end, and frees them.
    /// Past a part's worth of keys read back from the store ([`SpilledWindows::part`]) it
    /// stops, for the task to send them: the next call goes on
    /// ([`Operator::has_due_output`]).
    fn fire(&mut self, watermark: Timestamp, out: &mut Vec<Chunk>) -> Result<()> {
        if self.session_gap.is_some() && self.cold.is_some() {
            self.load_due_sessions(watermark)?;
        }
        let mut fired = Vec::new();
        let mut read_back = 0;
        while let Some((end, start)) = self.next_window() {
            if end - 1 > watermark {
                break;
            }
            if let Some(slots) = self.timers.remove(&(end, start)) {
                fired.extend(slots.into_iter().map(|slot| (start, end, slot)));
            }
            let window = window_prefix((end, start));
            if self.spilled.contains(&window) {
                // The keys in memory go first: freeing them deletes their stored entries,
                // so that the store's are the window's other keys.
                self.emit(&mut fired, out)?;
                while let Some((key_group, after)) = self.spilled.next_group(&window) {
                    if read_back >= self.spilled.part {
                        return Ok(());
                    }
                    read_back += self.fire_stored((start, end), key_group, after, out)?;
                }
            }
            if fired.len() >= FIRE_BATCH {
                self.emit(&mut fired, out)?;
            }
        }
        self.emit(&mut fired, out)
    }

    /// The first window to fire: the one, in memory or in the store, that ends first.
    fn next_window(&self) -> Option<(Timestamp, Timestamp)> {
        let in_memory = self.timers.keys().next().copied();
        let stored = self.spilled.first().and_then(window_of);
        in_memory.into_iter().chain(stored).min()
    }

    /// Emits the results of the windows' slots in `fired` (start, end, slot) as one chunk,
    /// and frees the slots.
    fn emit(
        &mut self,
        fired: &mut Vec<(Timestamp, Timestamp, u32)>,
        out: &mut Vec<Chunk>,
    ) -> Result<()> {
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
        for (_, _, slot) in fired.drain(..) {
            self.release(slot)?;
        }
        Ok(())
    }
}

/// Bytes of an aligned window's bounds before its key in the index.
const WINDOW_BOUNDS: usize = 16;

/// Window results emitted in one chunk at most.
const FIRE_BATCH: usize = 8192;

/// Writes an aligned slot's identity into `buffer`: its window's end and start, each in
/// bytes that sort as the time does, then its key. In a store, a window's keys are thus
/// together and windows in the order they fire.
fn aligned_id(buffer: &mut Vec<u8>, start: Timestamp, end: Timestamp, key: &[u8]) {
    buffer.clear();
    buffer.extend_from_slice(&window_prefix((end, start)));
    buffer.extend_from_slice(key);
}

fn millis(array: &ArrayRef) -> Result<Int64Array> {
    crate::epoch_millis(array.as_ref())
}

impl Operator for WindowAggregate {
    fn snapshot(&mut self, _request: &SnapshotRequest) -> Result<OperatorState> {
        if self.cold.is_some() {
            return self.snapshot_runs();
        }
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
        out.i64(self.watermark);
        SpilledWindows::default().write(&mut out);
        out.u64(INLINE_LAYOUT).u64(open.len() as u64);
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
        let mut stores = Vec::new();
        for snapshot in snapshots {
            let (version, mut input) = open_snapshot(snapshot, "a window aggregate")?;
            let w = input.i64()?;
            watermark = Some(watermark.map_or(w, |m: Timestamp| m.min(w)));
            let layout = match version {
                ..=5 => INLINE_LAYOUT,
                _ => {
                    self.spilled.read(&mut input, scope)?;
                    input.u64()?
                }
            };
            let what = "a window aggregate";
            let inline = |input: &mut StateReader<'_>| self.restore_inline(input, scope);
            stores.extend(read_layout(layout, &mut input, what, inline)?);
        }
        if let Some(w) = watermark {
            self.watermark = w;
        }
        let restored = self.restored_files.clone();
        match self.session_gap {
            Some(_) if !stores.is_empty() => {
                cold_slots::restore(&mut SessionStore(self), &restored, stores, scope)?;
                self.find_stored_timers(scope)?;
            }
            Some(_) => {}
            None => cold_slots::restore(self, &restored, stores, scope)?,
        }
        if self.cold.is_none() {
            // The stored windows were read into memory.
            self.spilled.clear();
        }
        Ok(())
    }

    fn process(&mut self, chunk: Chunk, _out: &mut Vec<Chunk>) -> Result<()> {
        if !chunk.is_append_only() {
            return Err(EddyError::Internal(
                "a window aggregate received updates; its input must be append-only".into(),
            ));
        }
        if let Some(cold) = &mut self.cold {
            cold.next_chunk();
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
        } else {
            let starts = millis(chunk.rows().column(self.columns.start))?;
            let ends = millis(chunk.rows().column(self.columns.end))?;
            self.accumulate(&chunk, &starts, &ends)?;
        }
        self.evict()
    }

    fn on_watermark(&mut self, watermark: Timestamp, out: &mut Vec<Chunk>) -> Result<()> {
        // Processing-time windows ignore event time, also its end: as in Flink, the
        // windows still open when the input ends are not fired.
        if self.processing_time.is_none() {
            self.watermark = self.watermark.max(watermark);
            self.fire(self.watermark, out)?;
            if let (Some(_), Some(cold)) = (self.session_gap, &mut self.cold) {
                // Keys read back whose sessions did not fire go again.
                cold.next_chunk();
                self.evict()?;
            }
        }
        Ok(())
    }

    fn has_due_output(&self) -> bool {
        self.processing_time.is_none()
            && (self
                .next_window()
                .is_some_and(|(end, _)| end - 1 <= self.watermark)
                || self
                    .stored_timers
                    .due(self.watermark.saturating_add(1))
                    .is_some())
    }

    fn processing_timer(&self) -> Option<Timestamp> {
        self.processing_time?;
        self.next_window().map(|(end, _)| end)
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
    /// Restores the open windows a snapshot holds, keeping the keys `scope` owns.
    fn restore_inline(&mut self, input: &mut StateReader<'_>, scope: &KeyScope) -> Result<()> {
        let mut not_owned = Vec::new();
        for _ in 0..input.count(40)? {
            let key = input.bytes()?;
            let key_group = input.u64()? as usize;
            let start = input.i64()?;
            let end = input.i64()?;
            let slot = match self.session_gap {
                Some(_) => self.new_session(start, end, key, key_group as u16),
                None => {
                    let slot = self.new_slot(start, end, key);
                    if let Some(cold) = &mut self.cold {
                        cold.placed(slot, key_group as u16, false);
                    }
                    slot
                }
            };
            self.accumulators.load(slot, input)?;
            if self.key_codec.is_some() && !scope.owns(key_group) {
                // Another subtask owns this key now.
                not_owned.push(slot);
            }
        }
        if !not_owned.is_empty() {
            let dropped: hashbrown::HashSet<u32> = not_owned.iter().copied().collect();
            for slots in self.timers.values_mut() {
                slots.retain(|s| !dropped.contains(s));
            }
            self.timers.retain(|_, slots| !slots.is_empty());
            for slot in not_owned {
                self.release(slot)?;
            }
        }
        Ok(())
    }

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
        // Where each row's key is in the store, with the LSM backend.
        let key_groups = match self.cold {
            Some(_) => key_groups(&key_arrays, self.max_parallelism)?,
            None => Vec::new(),
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
            let key_group = key_groups.get(i).map_or(0, |g| *g as u16);
            let slot = match self.session_gap {
                Some(_) => {
                    self.session_slot((start, end), (key, key_group), &mut redirect, &mut freed)?
                }
                None => self.aligned_slot(start, end, key, key_group)?,
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
        if let Some(cold) = &mut self.cold {
            for (slot, sign) in groups.iter().zip(&signs) {
                match (*sign, self.session_gap) {
                    (0, _) => {}
                    (_, Some(_)) => cold.touched(self.sessions.owner(*slot)),
                    (_, None) => cold.touched(*slot),
                }
            }
        }
        OperatorMetrics::add(&self.metrics.late_records_dropped, late);
        Ok(())
    }
}

#[cfg(test)]
mod tests;
