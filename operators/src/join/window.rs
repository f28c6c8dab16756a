//! Window joins: two inputs whose rows belong to windows (a window TVF's or a window
//! aggregate's rows), joined on their window bounds and keys. Each window's rows are held
//! until the watermark passes its end; then the window is joined whole, its results (padded
//! rows of an outer join, the rows of a semi or anti join) emitted once, and its rows
//! dropped, as Flink's window join does. Rows of a window that already closed are late:
//! dropped and counted.
//!
//! With the LSM backend, rows beyond the memory budget wait in an LSM store ([`cold`]).

mod cold;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, BooleanArray, UInt32Array, new_null_array};
use arrow::buffer::NullBuffer;
use arrow::compute::{concat_batches, filter_record_batch, take_record_batch};
use arrow::datatypes::{DataType, SchemaRef};
use arrow::record_batch::RecordBatch;
use arrow::row::{RowConverter, Rows};
use datafusion_physical_expr::PhysicalExpr;
use eddy_common::chunk::Chunk;
use eddy_common::event::Timestamp;
use eddy_common::metrics::OperatorMetrics;
use eddy_common::state::{OperatorState, SnapshotRequest, StateReader, StateWriter};
use eddy_common::{EddyError, Result};
use hashbrown::HashMap;

use self::cold::ColdRows;
use super::JoinKind;
use crate::partition::{KeyScope, key_groups};
use crate::stored_runs::{INLINE_LAYOUT, RUNS_LAYOUT, read_manifest};
use crate::{Operator, evaluate, open_snapshot_versions, row_codec, versioned_snapshot};

/// The window join's snapshot format: 2 adds, after the watermark, the windows an LSM
/// store holds rows of and the number of its next row, and after the rows in memory, the
/// store's runs.
pub(crate) const SNAPSHOT_VERSION: u64 = 2;

/// What a window join is, as planned.
#[derive(Debug, Clone)]
pub struct WindowJoinSpec {
    /// The key expressions over each input's rows (left, right), pairwise equal; they may
    /// include the window bounds.
    pub keys: [Vec<Arc<dyn PhysicalExpr>>; 2],
    /// The keys' types (the same on both sides).
    pub key_types: Vec<DataType>,
    /// Each input's rows.
    pub schemas: [SchemaRef; 2],
    /// The columns of each input holding its rows' `window_start` and `window_end`.
    pub windows: [(usize, usize); 2],
    /// The rest of the join condition, over the joined rows.
    pub filter: Option<Arc<dyn PhysicalExpr>>,
    /// NULL keys match each other (`IS NOT DISTINCT FROM`); otherwise they match nothing.
    pub nulls_equal: bool,
    /// Which rows are emitted.
    pub kind: JoinKind,
    /// The rows emitted: the left input's columns, then (except in a semi or anti join)
    /// the right's.
    pub schema: SchemaRef,
}

/// The rows one window holds, per input.
type WindowRows = [Vec<RecordBatch>; 2];

/// A window join of one subtask; input 0 is the left side, input 1 the right.
#[derive(Debug)]
pub struct WindowJoin {
    spec: WindowJoinSpec,
    key_codec: RowConverter,
    /// Open windows by (end, start), in the order they close.
    windows: BTreeMap<(Timestamp, Timestamp), WindowRows>,
    watermark: Timestamp,
    metrics: Arc<OperatorMetrics>,
    max_parallelism: usize,
    /// Each input's rows encoded, for snapshots and the store.
    row_codecs: [RowConverter; 2],
    /// Bytes of the rows in memory.
    held_bytes: usize,
    /// With the LSM backend: the rows written out of memory.
    cold: Option<ColdRows>,
    /// Where a restore finds the files its snapshots name.
    restored_files: PathBuf,
}

impl WindowJoin {
    /// A window join as `spec` says, its state split into `max_parallelism` key groups.
    pub fn new(
        spec: WindowJoinSpec,
        metrics: Arc<OperatorMetrics>,
        max_parallelism: usize,
    ) -> Result<Self> {
        let key_codec = crate::key_codec(&spec.key_types)?;
        let row_codecs = [row_codec(&spec.schemas[0])?, row_codec(&spec.schemas[1])?];
        Ok(WindowJoin {
            spec,
            key_codec,
            windows: BTreeMap::new(),
            watermark: Timestamp::MIN,
            metrics,
            max_parallelism,
            row_codecs,
            held_bytes: 0,
            cold: None,
            restored_files: PathBuf::new(),
        })
    }

    /// Rows held, per input.
    #[cfg(test)]
    fn held_rows(&self) -> [usize; 2] {
        let count = |input: usize| {
            self.windows
                .values()
                .flat_map(|w| &w[input])
                .map(|b| b.num_rows())
                .sum()
        };
        [count(0), count(1)]
    }

    /// Holds `rows` of input `input` in their windows; rows of closed windows are dropped.
    fn hold(&mut self, input: usize, rows: &RecordBatch) -> Result<()> {
        let (start_column, end_column) = self.spec.windows[input];
        let starts = crate::epoch_millis(rows.column(start_column).as_ref())?;
        let ends = crate::epoch_millis(rows.column(end_column).as_ref())?;
        // The rows of each window, in order; a chunk rarely spans more than a few.
        let mut by_window: Vec<((Timestamp, Timestamp), Vec<u32>)> = Vec::new();
        let mut late = 0u64;
        for i in 0..rows.num_rows() {
            if starts.is_null(i) || ends.is_null(i) {
                return Err(EddyError::Internal(format!(
                    "a window join's input {input} has a row without window bounds"
                )));
            }
            let window = (ends.value(i), starts.value(i));
            if window.0 - 1 <= self.watermark {
                late += 1;
                continue;
            }
            match by_window.iter_mut().find(|(w, _)| *w == window) {
                Some((_, indices)) => indices.push(i as u32),
                None => by_window.push((window, vec![i as u32])),
            }
        }
        OperatorMetrics::add(&self.metrics.late_records_dropped, late);
        for (window, indices) in by_window {
            let batch = match indices.len() == rows.num_rows() {
                true => rows.clone(),
                false => take_record_batch(rows, &UInt32Array::from(indices))?,
            };
            self.held_bytes += batch.get_array_memory_size();
            self.windows.entry(window).or_default()[input].push(batch);
        }
        Ok(())
    }

    /// Joins the rows of one closed window.
    fn join_window(&self, rows: WindowRows) -> Result<Option<RecordBatch>> {
        let [left, right] = rows;
        let left = concat_batches(&self.spec.schemas[0], &left)?;
        let right = concat_batches(&self.spec.schemas[1], &right)?;
        let (left_keys, left_valid) = self.keys_of(0, &left)?;
        let (right_keys, right_valid) = self.keys_of(1, &right)?;
        // Each right key's rows, then every pair of a left row with them.
        let mut partners: HashMap<&[u8], Vec<u32>> = HashMap::new();
        for r in
            (0..right.num_rows()).filter(|r| right_valid.as_ref().is_none_or(|v| v.is_valid(*r)))
        {
            partners
                .entry(right_keys.row(r).data())
                .or_default()
                .push(r as u32);
        }
        let (mut left_pairs, mut right_pairs) = (Vec::new(), Vec::new());
        for l in (0..left.num_rows()).filter(|l| left_valid.as_ref().is_none_or(|v| v.is_valid(*l)))
        {
            if let Some(matches) = partners.get(left_keys.row(l).data()) {
                left_pairs.extend(std::iter::repeat_n(l as u32, matches.len()));
                right_pairs.extend_from_slice(matches);
            }
        }
        let pairs = [
            UInt32Array::from(left_pairs),
            UInt32Array::from(right_pairs),
        ];
        let joined_schema = match self.spec.kind {
            JoinKind::LeftSemi | JoinKind::LeftAnti => None,
            _ => Some(&self.spec.schema),
        };
        let (joined, pairs) = self.joined_pairs(&left, &right, pairs, joined_schema)?;
        let matched = [
            matched_rows(left.num_rows(), &pairs[0]),
            matched_rows(right.num_rows(), &pairs[1]),
        ];
        let mut parts = Vec::new();
        match self.spec.kind {
            JoinKind::LeftSemi => parts.push(filter_record_batch(&left, &matched[0])?),
            JoinKind::LeftAnti => {
                let unmatched = arrow::compute::not(&matched[0])?;
                parts.push(filter_record_batch(&left, &unmatched)?);
            }
            kind => {
                parts.extend(joined);
                for (input, rows) in [(0, &left), (1, &right)] {
                    if kind.pads(input) {
                        let unmatched = arrow::compute::not(&matched[input])?;
                        let rows = filter_record_batch(rows, &unmatched)?;
                        parts.push(self.padded(input, &rows)?);
                    }
                }
            }
        }
        let output = concat_batches(&self.spec.schema, &parts)?;
        Ok((output.num_rows() > 0).then_some(output))
    }

    /// The key rows of input `input`'s rows, and which keys can match (no NULL in them,
    /// unless NULLs are equal here).
    fn keys_of(&self, input: usize, rows: &RecordBatch) -> Result<(Rows, Option<NullBuffer>)> {
        let arrays = self.spec.keys[input]
            .iter()
            .map(|k| evaluate(k, rows))
            .collect::<Result<Vec<_>>>()?;
        let valid = match self.spec.nulls_equal {
            true => None,
            false => arrays.iter().fold(None, |acc, k| {
                NullBuffer::union(acc.as_ref(), k.logical_nulls().as_ref())
            }),
        };
        Ok((self.key_codec.convert_columns(&arrays)?, valid))
    }

    /// The pairs that satisfy the rest of the condition: the joined rows (when `schema`
    /// asks for them) and the pairs' row indices on each side.
    fn joined_pairs(
        &self,
        left: &RecordBatch,
        right: &RecordBatch,
        pairs: [UInt32Array; 2],
        schema: Option<&SchemaRef>,
    ) -> Result<(Option<RecordBatch>, [UInt32Array; 2])> {
        if pairs[0].is_empty() || (self.spec.filter.is_none() && schema.is_none()) {
            return Ok((None, pairs));
        }
        let columns = [
            take_record_batch(left, &pairs[0])?.columns().to_vec(),
            take_record_batch(right, &pairs[1])?.columns().to_vec(),
        ]
        .concat();
        let both = match self.spec.kind {
            JoinKind::LeftSemi | JoinKind::LeftAnti => {
                super::pair_schema(&self.spec.schemas[0], &self.spec.schemas[1])
            }
            _ => self.spec.schema.clone(),
        };
        let joined = RecordBatch::try_new(both, columns)?;
        let (joined, pairs) = match &self.spec.filter {
            None => (joined, pairs),
            Some(filter) => {
                let keep = crate::true_only(&evaluate(filter, &joined)?)?;
                let pairs = [
                    arrow::compute::filter(&pairs[0], &keep)?,
                    arrow::compute::filter(&pairs[1], &keep)?,
                ]
                .map(|p| p.as_primitive().clone());
                (filter_record_batch(&joined, &keep)?, pairs)
            }
        };
        let joined = match schema {
            Some(schema) => Some(RecordBatch::try_new(
                schema.clone(),
                joined.columns().to_vec(),
            )?),
            None => None,
        };
        Ok((joined, pairs))
    }

    /// Rows of input `input` with the other side's columns NULL.
    fn padded(&self, input: usize, rows: &RecordBatch) -> Result<RecordBatch> {
        let width = self.spec.schema.fields().len();
        let left_width = self.spec.schemas[0].fields().len();
        let own = match input {
            0 => 0..left_width,
            _ => left_width..width,
        };
        let columns: Vec<ArrayRef> = (0..width)
            .map(|f| match own.contains(&f) {
                true => rows.column(f - own.start).clone(),
                false => new_null_array(self.spec.schema.field(f).data_type(), rows.num_rows()),
            })
            .collect();
        Ok(RecordBatch::try_new(self.spec.schema.clone(), columns)?)
    }
}

/// Which of `len` rows appear among `pairs`.
fn matched_rows(len: usize, pairs: &UInt32Array) -> BooleanArray {
    let mut matched = vec![false; len];
    for i in pairs.values() {
        matched[*i as usize] = true;
    }
    BooleanArray::from(matched)
}

impl Operator for WindowJoin {
    fn process(&mut self, chunk: Chunk, out: &mut Vec<Chunk>) -> Result<()> {
        self.process_input(0, chunk, out)
    }

    fn process_input(&mut self, input: usize, chunk: Chunk, _out: &mut Vec<Chunk>) -> Result<()> {
        if input > 1 {
            return Err(EddyError::Internal(format!(
                "a window join has two inputs, but rows came from input {input}"
            )));
        }
        if !chunk.is_append_only() {
            return Err(EddyError::Internal(
                "a window join received updates; its inputs must be append-only".into(),
            ));
        }
        self.hold(input, chunk.rows())?;
        self.evict()
    }

    fn on_watermark(&mut self, watermark: Timestamp, out: &mut Vec<Chunk>) -> Result<()> {
        self.watermark = self.watermark.max(watermark);
        while let Some(window) = self
            .next_window()
            .filter(|(end, _)| end - 1 <= self.watermark)
        {
            if !self.close_window(window, out)? {
                break;
            }
        }
        Ok(())
    }

    fn has_due_output(&self) -> bool {
        self.next_window()
            .is_some_and(|(end, _)| end - 1 <= self.watermark)
    }

    fn snapshot(&mut self, _request: &SnapshotRequest) -> Result<OperatorState> {
        // Windows are short-lived: their rows in memory are written whole every time.
        let mut out = versioned_snapshot(SNAPSHOT_VERSION);
        out.i64(self.watermark);
        self.write_spilled(&mut out);
        self.write_windows(&mut out)?;
        self.snapshot_store(out)
    }

    fn restore(&mut self, snapshots: &[&[u8]], scope: &KeyScope) -> Result<()> {
        let mut watermark = None::<Timestamp>;
        let mut stores = Vec::new();
        for snapshot in snapshots {
            let (version, mut input) =
                open_snapshot_versions(snapshot, "a window join", SNAPSHOT_VERSION)?;
            let w = input.i64()?;
            watermark = Some(watermark.map_or(w, |m| m.min(w)));
            if version >= 2 {
                self.read_spilled(&mut input, scope)?;
            }
            self.read_windows(&mut input, scope)?;
            let layout = match version {
                1 => INLINE_LAYOUT,
                _ => input.u64()?,
            };
            if layout == RUNS_LAYOUT {
                stores.push(read_manifest(&mut input, "a window join")?);
            }
        }
        if let Some(w) = watermark {
            self.watermark = self.watermark.max(w);
        }
        self.restore_stored(stores, scope)
    }
}

impl WindowJoin {
    /// Writes the rows in memory, by window, each with its key group.
    fn write_windows(&self, out: &mut StateWriter) -> Result<()> {
        out.u64(self.windows.len() as u64);
        for (&(end, start), rows) in &self.windows {
            out.i64(end).i64(start);
            for (input, batches) in rows.iter().enumerate() {
                let codec = &self.row_codecs[input];
                let held: usize = batches.iter().map(|b| b.num_rows()).sum();
                out.u64(held as u64);
                for batch in batches {
                    let keys = self.spec.keys[input]
                        .iter()
                        .map(|k| evaluate(k, batch))
                        .collect::<Result<Vec<_>>>()?;
                    let groups = key_groups(&keys, self.max_parallelism)?;
                    let encoded = codec.convert_columns(batch.columns())?;
                    for (row, group) in encoded.iter().zip(groups) {
                        out.u64(group as u64).bytes(row.data());
                    }
                }
            }
        }
        Ok(())
    }

    /// Reads what [`WindowJoin::write_windows`] wrote into memory, the rows `scope` owns.
    fn read_windows(&mut self, input: &mut StateReader<'_>, scope: &KeyScope) -> Result<()> {
        for _ in 0..input.count(18)? {
            let window = (input.i64()?, input.i64()?);
            for side in 0..2 {
                let (codec, schema) = (&self.row_codecs[side], &self.spec.schemas[side]);
                let Some(batch) = crate::read_owned_rows(input, codec, schema, scope)? else {
                    continue;
                };
                self.held_bytes += batch.get_array_memory_size();
                self.windows.entry(window).or_default()[side].push(batch);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
