//! Changelog normalization, as Flink's `ChangelogNormalize`: an upsert stream (the new row
//! of a key, or a delete that may carry the key alone, as a Kafka tombstone does) becomes a
//! retract stream by keeping each key's last row. A new row is `+I` for a key without
//! one, else `-U` of the kept row then `+U` (nothing when it equals the kept row and no
//! state TTL is set, as in Flink); a delete is `-D` of the kept row, whole, and nothing
//! for a key without one. With a state TTL, a key not written for the TTL is forgotten:
//! its next row is `+I` again.
//!
//! With the LSM backend, the rows of keys beyond the memory budget live in an LSM store
//! ([`cold`]).

mod cold;

use std::path::PathBuf;
use std::sync::Arc;

use arrow::datatypes::{DataType, SchemaRef};
use arrow::record_batch::RecordBatch;
use arrow::row::RowConverter;
use datafusion_physical_expr::PhysicalExpr;
use eddy_common::Result;
use eddy_common::chunk::{Chunk, Op};
use eddy_common::event::Timestamp;
use eddy_common::state::{OperatorState, SnapshotRequest, StateReader};

use crate::cold_slots::{self, ColdSlots, SlotState};
use crate::group_keys::PartitionKeys;
use crate::partition::KeyScope;
use crate::stored_runs::{self, INLINE_LAYOUT, RUNS_LAYOUT};
use crate::ttl::StateTtl;
use crate::{Operator, versioned_snapshot};

/// The snapshot format: 2 starts with the layout, the kept rows themselves or the runs of
/// an LSM store that holds them.
pub(crate) const SNAPSHOT_VERSION: u64 = 2;

/// A changelog normalization, as planned.
#[derive(Debug, Clone)]
pub struct NormalizeSpec {
    /// The primary key's columns, over the input rows.
    pub keys: Vec<Arc<dyn PhysicalExpr>>,
    /// Their types.
    pub key_types: Vec<DataType>,
    /// The rows (input and output alike).
    pub schema: SchemaRef,
    /// Milliseconds a key's row is kept after its last write (`None`: for good).
    pub state_ttl: Option<i64>,
}

/// A changelog normalization of one subtask.
#[derive(Debug)]
pub struct ChangelogNormalize {
    spec: NormalizeSpec,
    keys: PartitionKeys,
    row_codec: RowConverter,
    /// Each slot's last row, row-encoded (empty for a free slot).
    rows: Vec<Vec<u8>>,
    max_parallelism: usize,
    ttl: Option<StateTtl>,
    /// With the LSM backend: the kept rows written to a store.
    cold: Option<ColdSlots>,
    /// Where a restore put the state files its snapshots refer to.
    restored_files: PathBuf,
}

/// Output rows gathered before they are decoded: kept rows (encoded) or input rows.
#[derive(Default)]
struct Emission {
    kept: Vec<u8>,
    rows: Vec<Source>,
    ops: Vec<Op>,
}

/// Where an output row comes from.
#[derive(Clone, Copy)]
enum Source {
    /// A row that was kept: `len` bytes at `start` of the emission's buffer.
    Kept { start: usize, len: usize },
    /// Row `i` of the input chunk.
    Input(u32),
}

impl ChangelogNormalize {
    /// A normalization as `spec` says, its keyed state split into `max_parallelism` key
    /// groups.
    pub fn new(spec: NormalizeSpec, max_parallelism: usize) -> Result<Self> {
        Ok(ChangelogNormalize {
            keys: PartitionKeys::new(spec.keys.clone(), &spec.key_types)?,
            row_codec: crate::row_codec(&spec.schema)?,
            rows: Vec::new(),
            max_parallelism,
            ttl: spec.state_ttl.map(StateTtl::new),
            spec,
            cold: None,
            restored_files: PathBuf::new(),
        })
    }

    /// The slot of `key` (in `key_group`) in memory, a new one if it has none.
    fn slot(&mut self, key: &[u8], key_group: u16) -> u32 {
        if let Some(slot) = self.keys.find(key) {
            return slot;
        }
        let (slot, grown) = self.keys.insert(key);
        if grown {
            self.rows.push(Vec::new());
            if let Some(cold) = &mut self.cold {
                cold.resize(self.keys.len());
            }
        }
        if let Some(cold) = &mut self.cold {
            cold.placed(slot, key_group, false);
        }
        slot
    }

    /// Forgets `slot`'s key for good, in memory and in the store.
    fn release(&mut self, slot: u32) -> Result<()> {
        if let Some(cold) = &mut self.cold {
            cold.removed(slot, self.keys.key(slot))?;
        }
        self.free_slot(slot);
        Ok(())
    }

    /// The kept row of `key` (in `key_group`), in memory or read back from the store, if
    /// it has one that has not expired at `now`.
    fn kept(&mut self, key: &[u8], key_group: u16, now: Option<Timestamp>) -> Result<Option<u32>> {
        let Some(slot) = self.keys.find(key) else {
            return cold_slots::load(self, key, key_group, now);
        };
        if let (Some(ttl), Some(now)) = (&self.ttl, now)
            && ttl.is_expired(slot, now)
        {
            self.release(slot)?;
            return Ok(None);
        }
        Ok(Some(slot))
    }

    /// Applies row `i` (its key, of `key_group`, and encoded row) to the state, noting
    /// what it emits.
    fn apply(
        &mut self,
        (i, op): (u32, Op),
        (key, key_group): (&[u8], u16),
        row: &[u8],
        now: Option<Timestamp>,
        out: &mut Emission,
    ) -> Result<()> {
        let kept = self.kept(key, key_group, now)?;
        if !op.is_accumulate() {
            if let Some(slot) = kept {
                out.push_kept(Op::Delete, &self.rows[slot as usize]);
                self.release(slot)?;
            }
            return Ok(());
        }
        match kept {
            None => out.push_input(Op::Insert, i),
            Some(slot) if self.ttl.is_none() && self.rows[slot as usize] == row => return Ok(()),
            Some(slot) => {
                out.push_kept(Op::UpdateBefore, &self.rows[slot as usize]);
                out.push_input(Op::UpdateAfter, i);
            }
        }
        let slot = self.slot(key, key_group);
        let kept_row = &mut self.rows[slot as usize];
        kept_row.clear();
        kept_row.extend_from_slice(row);
        if let (Some(ttl), Some(now)) = (&mut self.ttl, now) {
            ttl.write(slot, now);
        }
        if let Some(cold) = &mut self.cold {
            cold.touched(slot);
        }
        Ok(())
    }

    /// The emission as a chunk: kept rows decoded, input rows taken from `input`.
    fn chunk_of(&self, emission: Emission, input: &RecordBatch) -> Result<Option<Chunk>> {
        if emission.ops.is_empty() {
            return Ok(None);
        }
        let parser = self.row_codec.parser();
        let kept: Vec<_> = emission
            .rows
            .iter()
            .filter_map(|source| match source {
                Source::Kept { start, len } => {
                    Some(parser.parse(&emission.kept[*start..start + len]))
                }
                Source::Input(_) => None,
            })
            .collect();
        let kept =
            RecordBatch::try_new(self.spec.schema.clone(), self.row_codec.convert_rows(kept)?)?;
        // Interleave the two in emission order: (batch, row) pairs over [input, kept].
        let mut next_kept = 0;
        let indices: Vec<(usize, usize)> = emission
            .rows
            .iter()
            .map(|source| match source {
                Source::Input(i) => (0, *i as usize),
                Source::Kept { .. } => {
                    next_kept += 1;
                    (1, next_kept - 1)
                }
            })
            .collect();
        let columns = (0..self.spec.schema.fields().len())
            .map(|c| {
                let sources = [input.column(c).as_ref(), kept.column(c).as_ref()];
                arrow::compute::interleave(&sources, &indices)
            })
            .collect::<Result<Vec<_>, _>>()?;
        let rows = RecordBatch::try_new(self.spec.schema.clone(), columns)?;
        Ok(Some(Chunk::from_ops(rows, emission.ops)))
    }
}

impl Emission {
    fn push_kept(&mut self, op: Op, row: &[u8]) {
        self.rows.push(Source::Kept {
            start: self.kept.len(),
            len: row.len(),
        });
        self.kept.extend_from_slice(row);
        self.ops.push(op);
    }

    fn push_input(&mut self, op: Op, i: u32) {
        self.rows.push(Source::Input(i));
        self.ops.push(op);
    }
}

impl Operator for ChangelogNormalize {
    fn process(&mut self, chunk: Chunk, out: &mut Vec<Chunk>) -> Result<()> {
        let now = self.ttl.as_ref().map(StateTtl::now);
        let expired = match (now, &mut self.ttl) {
            (Some(now), Some(ttl)) => ttl.expired(now),
            _ => Vec::new(),
        };
        for slot in expired {
            self.release(slot)?;
        }
        if let Some(cold) = &mut self.cold {
            cold.next_chunk();
        }
        let input = chunk.rows();
        let max_parallelism = self.cold.as_ref().map(|_| self.max_parallelism);
        let (keys, key_groups) = self.keys.encode_with_key_groups(input, max_parallelism)?;
        let rows = self.row_codec.convert_columns(input.columns())?;
        let mut emission = Emission::default();
        for i in 0..chunk.num_rows() {
            let key = keys.as_ref().map_or(&[][..], |k| k.row(i).data());
            let key_group = key_groups.get(i).map_or(0, |g| *g as u16);
            self.apply(
                (i as u32, chunk.op(i)),
                (key, key_group),
                rows.row(i).data(),
                now,
                &mut emission,
            )?;
        }
        if let Some(chunk) = self.chunk_of(emission, input)? {
            out.push(chunk);
        }
        cold_slots::evict(self)
    }

    fn snapshot(&mut self, _request: &SnapshotRequest) -> Result<OperatorState> {
        if self.cold.is_some() {
            return cold_slots::snapshot(self, versioned_snapshot(SNAPSHOT_VERSION));
        }
        let live = self.live_slots();
        let key_groups = self.keys.key_groups(&live, self.max_parallelism)?;
        let mut out = versioned_snapshot(SNAPSHOT_VERSION);
        out.u64(INLINE_LAYOUT).u64(live.len() as u64);
        for (slot, key_group) in live.iter().zip(key_groups) {
            let written = self.ttl.as_ref().and_then(|t| t.written(*slot));
            out.bytes(self.keys.key(*slot))
                .u64(key_group as u64)
                .i64(written.unwrap_or(Timestamp::MIN))
                .bytes(&self.rows[*slot as usize]);
        }
        Ok(OperatorState::full(out.finish()))
    }

    fn full_snapshot_estimate(&self) -> u64 {
        self.rows.iter().map(|r| r.len() as u64 + 16).sum()
    }

    fn restore(&mut self, snapshots: &[&[u8]], scope: &KeyScope) -> Result<()> {
        let restored_at = self.ttl.as_ref().map_or(0, StateTtl::now);
        let mut stores = Vec::new();
        for snapshot in snapshots {
            let (version, mut input) = open_snapshot(snapshot)?;
            let layout = match version {
                1 => INLINE_LAYOUT,
                _ => input.u64()?,
            };
            if layout == RUNS_LAYOUT {
                stores.push(stored_runs::read_manifest(&mut input, Self::WHAT)?);
                continue;
            }
            for _ in 0..input.count(4)? {
                let key = input.bytes()?;
                let key_group = input.u64()? as usize;
                let written = input.i64()?;
                let row = input.bytes()?;
                if self.keys.is_keyed() && !scope.owns(key_group) {
                    continue;
                }
                let slot = self.slot(key, key_group as u16);
                self.rows[slot as usize] = row.to_vec();
                if let Some(ttl) = &mut self.ttl {
                    let written = if written == Timestamp::MIN {
                        restored_at
                    } else {
                        written
                    };
                    ttl.write(slot, written);
                }
            }
        }
        let restored = self.restored_files.clone();
        cold_slots::restore(self, &restored, stores, scope)
    }
}

/// A snapshot's format version, and its reader after the version.
fn open_snapshot(snapshot: &[u8]) -> Result<(u64, StateReader<'_>)> {
    crate::open_snapshot_versions(snapshot, ChangelogNormalize::WHAT, SNAPSHOT_VERSION)
}

#[cfg(test)]
mod tests;
