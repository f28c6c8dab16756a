//! Changelog normalization, as Flink's `ChangelogNormalize`: an upsert stream (the new row
//! of a key, or a delete that may carry the key alone, as a Kafka tombstone does) becomes a
//! retract stream by keeping each key's last row. A new row is `+I` for a key without
//! one, else `-U` of the kept row then `+U` (nothing when it equals the kept row and no
//! state TTL is set, as in Flink); a delete is `-D` of the kept row, whole, and nothing
//! for a key without one. With a state TTL, a key not written for the TTL is forgotten:
//! its next row is `+I` again.

use std::sync::Arc;

use arrow::datatypes::{DataType, SchemaRef};
use arrow::record_batch::RecordBatch;
use arrow::row::RowConverter;
use datafusion_physical_expr::PhysicalExpr;
use eddy_common::Result;
use eddy_common::chunk::{Chunk, Op};
use eddy_common::event::Timestamp;
use eddy_common::state::{OperatorState, SnapshotRequest};

use crate::group_keys::PartitionKeys;
use crate::partition::KeyScope;
use crate::ttl::StateTtl;
use crate::{Operator, open_versioned_snapshot, versioned_snapshot};

pub(crate) const SNAPSHOT_VERSION: u64 = 1;

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
        })
    }

    fn slot(&mut self, key: &[u8]) -> u32 {
        if let Some(slot) = self.keys.find(key) {
            return slot;
        }
        let (slot, grown) = self.keys.insert(key);
        if grown {
            self.rows.push(Vec::new());
        }
        slot
    }

    fn release(&mut self, slot: u32) {
        self.rows[slot as usize] = Vec::new();
        self.keys.release(slot);
        if let Some(ttl) = &mut self.ttl {
            ttl.forget(slot);
        }
    }

    /// The kept row of `key`, if it has one that has not expired at `now`.
    fn kept(&mut self, key: &[u8], now: Option<Timestamp>) -> Option<u32> {
        let slot = self.keys.find(key)?;
        if let (Some(ttl), Some(now)) = (&self.ttl, now)
            && ttl.is_expired(slot, now)
        {
            self.release(slot);
            return None;
        }
        Some(slot)
    }

    /// Applies row `i` (its key and encoded row) to the state, noting what it emits.
    fn apply(
        &mut self,
        i: u32,
        op: Op,
        key: &[u8],
        row: &[u8],
        now: Option<Timestamp>,
        out: &mut Emission,
    ) {
        let kept = self.kept(key, now);
        if !op.is_accumulate() {
            if let Some(slot) = kept {
                out.push_kept(Op::Delete, &self.rows[slot as usize]);
                self.release(slot);
            }
            return;
        }
        match kept {
            None => out.push_input(Op::Insert, i),
            Some(slot) if self.ttl.is_none() && self.rows[slot as usize] == row => return,
            Some(slot) => {
                out.push_kept(Op::UpdateBefore, &self.rows[slot as usize]);
                out.push_input(Op::UpdateAfter, i);
            }
        }
        let slot = self.slot(key);
        let kept_row = &mut self.rows[slot as usize];
        kept_row.clear();
        kept_row.extend_from_slice(row);
        if let (Some(ttl), Some(now)) = (&mut self.ttl, now) {
            ttl.write(slot, now);
        }
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
            self.release(slot);
        }
        let input = chunk.rows();
        let keys = self.keys.encode(input)?;
        let rows = self.row_codec.convert_columns(input.columns())?;
        let mut emission = Emission::default();
        for i in 0..chunk.num_rows() {
            let key = keys.as_ref().map_or(&[][..], |k| k.row(i).data());
            self.apply(
                i as u32,
                chunk.op(i),
                key,
                rows.row(i).data(),
                now,
                &mut emission,
            );
        }
        if let Some(chunk) = self.chunk_of(emission, input)? {
            out.push(chunk);
        }
        Ok(())
    }

    fn snapshot(&mut self, _request: &SnapshotRequest) -> Result<OperatorState> {
        let live: Vec<u32> = (0..self.keys.len() as u32)
            .filter(|s| !self.rows[*s as usize].is_empty())
            .collect();
        let key_groups = self.keys.key_groups(&live, self.max_parallelism)?;
        let mut out = versioned_snapshot(SNAPSHOT_VERSION);
        out.u64(live.len() as u64);
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
        for snapshot in snapshots {
            let mut input =
                open_versioned_snapshot(snapshot, "a changelog normalization", SNAPSHOT_VERSION)?;
            for _ in 0..input.count(4)? {
                let key = input.bytes()?;
                let key_group = input.u64()? as usize;
                let written = input.i64()?;
                let row = input.bytes()?;
                if self.keys.is_keyed() && !scope.owns(key_group) {
                    continue;
                }
                let slot = self.slot(key);
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
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use arrow::array::{Int64Array, StringArray};
    use arrow::datatypes::{Field, Schema};
    use datafusion_physical_expr::expressions::Column;

    use super::*;

    fn spec(ttl: Option<i64>) -> NormalizeSpec {
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("v", DataType::Utf8, true),
        ]));
        NormalizeSpec {
            keys: vec![Arc::new(Column::new("id", 0))],
            key_types: vec![DataType::Int64],
            schema,
            state_ttl: ttl,
        }
    }

    fn chunk(rows: &[(Op, i64, Option<&str>)]) -> Chunk {
        let spec = spec(None);
        let batch = RecordBatch::try_new(
            spec.schema,
            vec![
                Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.1))),
                Arc::new(StringArray::from_iter(rows.iter().map(|r| r.2))),
            ],
        )
        .unwrap();
        Chunk::from_ops(batch, rows.iter().map(|r| r.0).collect())
    }

    fn lines(chunks: &[Chunk]) -> Vec<String> {
        chunks.iter().flat_map(Chunk::to_pretty).collect()
    }

    fn run(op: &mut ChangelogNormalize, rows: &[(Op, i64, Option<&str>)]) -> Vec<String> {
        let mut out = Vec::new();
        op.process(chunk(rows), &mut out).unwrap();
        lines(&out)
    }

    use Op::{Delete, UpdateAfter};

    #[test]
    fn upserts_become_inserts_and_updates_and_tombstones_delete_the_kept_row() {
        let mut op = ChangelogNormalize::new(spec(None), 128).unwrap();
        assert_eq!(
            run(
                &mut op,
                &[
                    (UpdateAfter, 1, Some("a")),
                    (UpdateAfter, 2, Some("b")),
                    (UpdateAfter, 1, Some("c")),
                    (UpdateAfter, 1, Some("c")),
                    (Delete, 2, None),
                    (Delete, 3, None),
                ]
            ),
            ["+I 1 a", "+I 2 b", "-U 1 a", "+U 1 c", "-D 2 b"]
        );
        assert_eq!(
            run(&mut op, &[(UpdateAfter, 2, Some("d")), (Delete, 1, None)]),
            ["+I 2 d", "-D 1 c"]
        );
    }

    #[test]
    fn the_kept_rows_survive_a_snapshot_and_split_by_key_group() {
        let mut op = ChangelogNormalize::new(spec(None), 128).unwrap();
        let rows: Vec<(Op, i64, Option<&str>)> =
            (0..50).map(|i| (UpdateAfter, i, Some("x"))).collect();
        run(&mut op, &rows);
        let snapshot = op.snapshot(&SnapshotRequest::full(1)).unwrap();
        let bytes = snapshot.bytes.to_vec();
        let mut restored = 0;
        for subtask in 0..2 {
            let scope = KeyScope {
                subtask,
                parallelism: 2,
                max_parallelism: 128,
            };
            let mut op = ChangelogNormalize::new(spec(None), 128).unwrap();
            op.restore(&[&bytes], &scope).unwrap();
            let deletes: Vec<(Op, i64, Option<&str>)> =
                (0..50).map(|i| (Delete, i, None)).collect();
            restored += run(&mut op, &deletes).len();
        }
        assert_eq!(restored, 50, "each key restored in exactly one subtask");
    }

    #[test]
    fn with_a_ttl_an_unchanged_row_is_sent_again_and_an_expired_key_starts_afresh() {
        crate::ttl::test_clock::set(1_000);
        let mut op = ChangelogNormalize::new(spec(Some(100)), 128).unwrap();
        op.ttl = op.ttl.map(|t| t.with_clock(crate::ttl::test_clock::now));
        assert_eq!(
            run(
                &mut op,
                &[(UpdateAfter, 1, Some("a")), (UpdateAfter, 1, Some("a"))]
            ),
            ["+I 1 a", "-U 1 a", "+U 1 a"]
        );
        crate::ttl::test_clock::set(1_200);
        assert_eq!(run(&mut op, &[(UpdateAfter, 1, Some("b"))]), ["+I 1 b"]);
    }
}
