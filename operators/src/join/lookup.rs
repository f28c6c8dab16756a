//! Lookup joins (`JOIN t FOR SYSTEM_TIME AS OF o.proc_time ON o.k = t.k`): each row of the
//! stream is joined with the rows the dimension table holds for its key when it is
//! processed, as Flink's lookup join does. Keys are looked up a chunk at a time (one query
//! for every key of the chunk not in the cache), and a cache may keep what was read
//! (`lookup.cache`). The operator keeps no state: a restore looks keys up again.

use std::collections::VecDeque;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, UInt32Array, new_null_array};
use arrow::buffer::NullBuffer;
use arrow::compute::{concat_batches, filter_record_batch, take_record_batch};
use arrow::datatypes::{DataType, SchemaRef};
use arrow::record_batch::RecordBatch;
use arrow::row::RowConverter;
use datafusion_physical_expr::PhysicalExpr;
use eddy_common::chunk::{Chunk, Op};
use eddy_common::event::Timestamp;
use eddy_common::{EddyError, Result};
use hashbrown::HashMap;

use crate::{Operator, evaluate};

/// Looks rows of a dimension table up by key.
pub trait Lookup: Send + std::fmt::Debug {
    /// The table's rows whose key columns equal one of `keys` (distinct keys, one array
    /// per key column): the rows, and for each the index of the key it matches.
    fn lookup(&mut self, keys: &[ArrayRef]) -> Result<(RecordBatch, Vec<u32>)>;
}

pub use eddy_common::config::LookupCache;

/// A lookup join, as planned.
#[derive(Debug, Clone)]
pub struct LookupJoinSpec {
    /// The key expressions over the stream's rows, of the lookup keys' types.
    pub keys: Vec<Arc<dyn PhysicalExpr>>,
    /// The key types.
    pub key_types: Vec<DataType>,
    /// What to do with a looked-up batch (table rows) before it is joined: the scan's
    /// projection, filters and projections on the table's side.
    pub table_side: Vec<TableStep>,
    /// The table side's rows after `table_side`.
    pub table_schema: SchemaRef,
    /// The rest of the join condition, over the joined rows.
    pub filter: Option<Arc<dyn PhysicalExpr>>,
    /// A LEFT JOIN: a stream row that finds nothing is emitted padded with NULLs.
    pub left_outer: bool,
    /// The joined rows: the stream's columns, then the table side's.
    pub schema: SchemaRef,
    /// The cache, if any.
    pub cache: Option<LookupCache>,
}

/// One step from looked-up table rows to the join's table side.
#[derive(Debug, Clone)]
pub enum TableStep {
    /// Keeps the rows for which the predicate holds.
    Filter(Arc<dyn PhysicalExpr>),
    /// Computes new columns.
    Project(Vec<Arc<dyn PhysicalExpr>>, SchemaRef),
}

/// A lookup join of one subtask.
#[derive(Debug)]
pub struct LookupJoin {
    spec: LookupJoinSpec,
    lookup: Box<dyn Lookup>,
    key_codec: RowConverter,
    cache: Option<Cache>,
    /// The wall clock, for the cache (replaced in tests).
    clock: fn() -> Timestamp,
}

/// Keys read before, with the table side's rows each holds.
#[derive(Debug)]
struct Cache {
    config: LookupCache,
    entries: HashMap<Box<[u8]>, Cached>,
    /// Keys in the order they were read (a key read again is listed again; the older
    /// listing is skipped by its read time).
    order: VecDeque<(Box<[u8]>, Timestamp)>,
}

#[derive(Debug)]
struct Cached {
    rows: RecordBatch,
    read_at: Timestamp,
    used_at: Timestamp,
}

impl Cache {
    /// The rows of `key`, if kept and not expired at `now`.
    fn get(&mut self, key: &[u8], now: Timestamp) -> Option<RecordBatch> {
        let config = self.config;
        let entry = self.entries.get_mut(key)?;
        let millis = |d: std::time::Duration| d.as_millis() as i64;
        let written_out = config
            .expire_after_write
            .is_some_and(|d| entry.read_at + millis(d) <= now);
        let idle_out = config
            .expire_after_access
            .is_some_and(|d| entry.used_at + millis(d) <= now);
        if written_out || idle_out {
            self.entries.remove(key);
            return None;
        }
        entry.used_at = now;
        Some(entry.rows.clone())
    }

    fn put(&mut self, key: &[u8], rows: RecordBatch, now: Timestamp) {
        if rows.num_rows() == 0 && !self.config.cache_missing_keys {
            return;
        }
        self.order.push_back((key.into(), now));
        self.entries.insert(
            key.into(),
            Cached {
                rows,
                read_at: now,
                used_at: now,
            },
        );
        while self.entries.len() > self.config.max_rows {
            let Some((oldest, read_at)) = self.order.pop_front() else {
                break;
            };
            if self
                .entries
                .get(&oldest)
                .is_some_and(|e| e.read_at == read_at)
            {
                self.entries.remove(&oldest);
            }
        }
        // Listings of keys read again or dropped pile up: keep them near the cache's size.
        if self.order.len() > 2 * self.config.max_rows.max(1024) {
            let entries = &self.entries;
            self.order
                .retain(|(key, at)| entries.get(key).is_some_and(|e| e.read_at == *at));
        }
    }
}

impl LookupJoin {
    /// A lookup join as `spec` says, reading the table through `lookup`.
    pub fn new(spec: LookupJoinSpec, lookup: Box<dyn Lookup>) -> Result<Self> {
        let key_codec = crate::key_codec(&spec.key_types)?;
        let cache = spec.cache.map(|config| Cache {
            config,
            entries: HashMap::new(),
            order: VecDeque::new(),
        });
        Ok(LookupJoin {
            spec,
            lookup,
            key_codec,
            cache,
            clock: crate::wall_clock,
        })
    }

    /// The table side's rows for each distinct key of `keys` (rows of `keys` with a NULL
    /// key find nothing): from the cache, or read in one lookup.
    fn rows_of(&mut self, keys: &arrow::row::Rows, distinct: &[usize]) -> Result<Vec<RecordBatch>> {
        let now = (self.clock)();
        let mut found: Vec<Option<RecordBatch>> = distinct
            .iter()
            .map(|&i| {
                let cache = self.cache.as_mut()?;
                cache.get(keys.row(i).data(), now)
            })
            .collect();
        let missing: Vec<usize> = (0..distinct.len())
            .filter(|d| found[*d].is_none())
            .collect();
        if !missing.is_empty() {
            let rows = missing.iter().map(|d| keys.row(distinct[*d]));
            let key_columns = self.key_codec.convert_rows(rows)?;
            let (table_rows, matched) = self.lookup.lookup(&key_columns)?;
            let table_rows = self.table_side(table_rows)?;
            // The rows of each missing key, in the order read.
            let mut per_key: Vec<Vec<u32>> = vec![Vec::new(); missing.len()];
            for (row, key) in matched.iter().enumerate() {
                let slot = per_key.get_mut(*key as usize).ok_or_else(|| {
                    EddyError::Internal(format!("a lookup answered for key {key} it was not asked"))
                })?;
                slot.push(row as u32);
            }
            for (m, rows) in missing.iter().zip(per_key) {
                let rows = take_record_batch(&table_rows, &UInt32Array::from(rows))?;
                if let Some(cache) = &mut self.cache {
                    cache.put(keys.row(distinct[*m]).data(), rows.clone(), now);
                }
                found[*m] = Some(rows);
            }
        }
        Ok(found
            .into_iter()
            .map(|f| f.expect("every key found or read"))
            .collect())
    }

    /// Looked-up table rows as the join's table side (the scan's projection, filters).
    fn table_side(&self, mut rows: RecordBatch) -> Result<RecordBatch> {
        for step in &self.spec.table_side {
            rows = match step {
                TableStep::Filter(predicate) => {
                    let keep = crate::true_only(&evaluate(predicate, &rows)?)?;
                    filter_record_batch(&rows, &keep)?
                }
                TableStep::Project(exprs, schema) => {
                    let columns = exprs
                        .iter()
                        .map(|e| evaluate(e, &rows))
                        .collect::<Result<Vec<_>>>()?;
                    RecordBatch::try_new(schema.clone(), columns)?
                }
            };
        }
        Ok(rows)
    }
}

impl Operator for LookupJoin {
    fn process(&mut self, chunk: Chunk, out: &mut Vec<Chunk>) -> Result<()> {
        let rows = chunk.rows();
        let key_arrays = self
            .spec
            .keys
            .iter()
            .map(|k| evaluate(k, rows))
            .collect::<Result<Vec<_>>>()?;
        let valid = key_arrays.iter().fold(None, |acc: Option<NullBuffer>, k| {
            NullBuffer::union(acc.as_ref(), k.logical_nulls().as_ref())
        });
        let keys = self.key_codec.convert_columns(&key_arrays)?;
        // Each row's distinct key (NULL keys find nothing).
        let mut index: HashMap<&[u8], usize> = HashMap::new();
        let mut distinct = Vec::new();
        let mut key_of = Vec::with_capacity(rows.num_rows());
        for i in 0..rows.num_rows() {
            if valid.as_ref().is_some_and(|v| v.is_null(i)) {
                key_of.push(None);
                continue;
            }
            let next = distinct.len();
            let d = *index.entry(keys.row(i).data()).or_insert(next);
            if d == next {
                distinct.push(i);
            }
            key_of.push(Some(d));
        }
        let found = self.rows_of(&keys, &distinct)?;
        let table_rows = concat_batches(&self.spec.table_schema, &found)?;
        let mut offsets = Vec::with_capacity(found.len());
        let mut offset = 0u32;
        for batch in &found {
            offsets.push((offset, batch.num_rows() as u32));
            offset += batch.num_rows() as u32;
        }
        // Every (stream row, table row) pair, in stream order.
        let (mut stream_side, mut table_side) = (Vec::new(), Vec::new());
        for (i, d) in key_of.iter().enumerate() {
            let Some(d) = d else { continue };
            let (start, len) = offsets[*d];
            stream_side.extend(std::iter::repeat_n(i as u32, len as usize));
            table_side.extend(start..start + len);
        }
        let mut columns = take_record_batch(rows, &UInt32Array::from(stream_side.clone()))?
            .columns()
            .to_vec();
        columns.extend(
            take_record_batch(&table_rows, &UInt32Array::from(table_side))?
                .columns()
                .iter()
                .cloned(),
        );
        let joined = RecordBatch::try_new(self.spec.schema.clone(), columns)?;
        let keep = match &self.spec.filter {
            Some(filter) => Some(crate::true_only(&evaluate(filter, &joined)?)?),
            None => None,
        };
        let kept = |pair: usize| keep.as_ref().is_none_or(|k| k.value(pair));
        // In stream order: each row's pairs, or (a LEFT JOIN) the row padded.
        let mut order: Vec<(usize, usize)> = Vec::new();
        let mut ops = Vec::new();
        let mut padded = Vec::new();
        let mut pair = 0;
        for i in 0..rows.num_rows() {
            let mut joins = 0;
            while pair < stream_side.len() && stream_side[pair] as usize == i {
                if kept(pair) {
                    order.push((0, pair));
                    ops.push(chunk.op(i));
                    joins += 1;
                }
                pair += 1;
            }
            if joins == 0 && self.spec.left_outer {
                order.push((1, padded.len()));
                padded.push(i as u32);
                ops.push(chunk.op(i));
            }
        }
        if order.is_empty() {
            return Ok(());
        }
        let padded_rows = self.padded(rows, &padded)?;
        let columns = (0..self.spec.schema.fields().len())
            .map(|c| {
                let sources: [&dyn Array; 2] =
                    [joined.column(c).as_ref(), padded_rows.column(c).as_ref()];
                Ok(arrow::compute::interleave(&sources, &order)?)
            })
            .collect::<Result<Vec<ArrayRef>>>()?;
        let ops: Vec<Op> = ops;
        out.push(Chunk::from_ops(
            RecordBatch::try_new(self.spec.schema.clone(), columns)?,
            ops,
        ));
        Ok(())
    }
}

impl LookupJoin {
    /// The stream rows at `indices`, with the table side's columns NULL.
    fn padded(&self, rows: &RecordBatch, indices: &[u32]) -> Result<RecordBatch> {
        let taken = take_record_batch(rows, &UInt32Array::from(indices.to_vec()))?;
        let mut columns = taken.columns().to_vec();
        for field in self.spec.table_schema.fields() {
            columns.push(new_null_array(field.data_type(), indices.len()));
        }
        Ok(RecordBatch::try_new(self.spec.schema.clone(), columns)?)
    }
}

#[cfg(test)]
mod tests;
