//! The probe step: the pairs a chunk's rows make with the other side's held rows.

use arrow::array::{Array, ArrayRef, AsArray, BooleanArray, UInt32Array};
use arrow::buffer::NullBuffer;
use arrow::compute::take_record_batch;
use arrow::record_batch::RecordBatch;
use arrow::row::Rows;
use eddy_common::Result;
use eddy_common::chunk::{Chunk, Op};

use super::StreamingJoin;
use crate::evaluate;

/// A chunk's rows, encoded as their side holds them, and the pairs they make.
pub(super) struct Probe {
    /// Each row's join key, row-encoded.
    pub keys: Rows,
    /// Each row, row-encoded.
    pub rows: Rows,
    /// Which rows have a key that can match (none NULL, unless NULLs are equal); `None`:
    /// all of them.
    valid: Option<NullBuffer>,
    /// Per pair, in the chunk's order: the chunk's row.
    pub these: Vec<u32>,
    /// Per pair: the held row of the other side it met (its entry).
    pub partners: Vec<u32>,
    /// The pairs, joined (the left columns, then the right), each with its row's change.
    pub joined: Option<Chunk>,
    /// Whether the rest of the condition holds for each pair; `None`: no condition.
    keep: Option<BooleanArray>,
}

impl Probe {
    /// Whether row `i`'s key can match anything.
    pub fn is_valid(&self, i: usize) -> bool {
        self.valid.as_ref().is_none_or(|v| v.is_valid(i))
    }

    /// Whether pair `pair` satisfies the rest of the condition.
    pub fn kept(&self, pair: usize) -> bool {
        self.keep
            .as_ref()
            .is_none_or(|k| k.is_valid(pair) && k.value(pair))
    }

    /// The pairs that satisfy the condition, if any: an inner join's output.
    pub fn kept_pairs(&self) -> Result<Option<Chunk>> {
        let Some(joined) = &self.joined else {
            return Ok(None);
        };
        let kept = match &self.keep {
            None => joined.clone(),
            Some(keep) => joined.filter(keep)?,
        };
        Ok(Some(kept).filter(|chunk| !chunk.is_empty()))
    }
}

impl StreamingJoin {
    /// The join keys of `chunk`'s rows (from input `input`), and which can match: rows
    /// with a NULL key match nothing (unless NULLs are equal here) and are not kept
    /// (`None`: every row can).
    pub(super) fn evaluate_keys(
        &self,
        input: usize,
        chunk: &Chunk,
    ) -> Result<(Vec<ArrayRef>, Option<NullBuffer>)> {
        let key_arrays = self.sides[input]
            .keys
            .iter()
            .map(|k| evaluate(k, chunk.rows()))
            .collect::<Result<Vec<_>>>()?;
        let valid = match self.nulls_equal {
            true => None,
            false => key_arrays.iter().fold(None, |acc, k| {
                NullBuffer::union(acc.as_ref(), k.logical_nulls().as_ref())
            }),
        };
        Ok((key_arrays, valid))
    }

    /// Every pair of a row of `chunk` (from input `input`) with a held row of its key on
    /// the other side (skipping rows written at or before `other_expired`), and whether the
    /// rest of the condition holds for each.
    pub(super) fn probe(
        &self,
        input: usize,
        chunk: &Chunk,
        other_expired: Option<i64>,
    ) -> Result<Probe> {
        let (this, other) = (&self.sides[input], &self.sides[1 - input]);
        let (key_arrays, valid) = self.evaluate_keys(input, chunk)?;
        let keys = self.key_codec.convert_columns(&key_arrays)?;
        let rows = this.codec.convert_columns(chunk.rows().columns())?;
        let mut probe = Probe {
            keys,
            rows,
            valid,
            these: Vec::new(),
            partners: Vec::new(),
            joined: None,
            keep: None,
        };
        let parser = other.codec.parser();
        let mut others = Vec::new();
        let mut ops: Vec<Op> = Vec::new();
        for i in 0..chunk.num_rows() {
            if !probe.is_valid(i) {
                continue;
            }
            let op = chunk.op(i);
            for (id, row) in other.matching(probe.keys.row(i).data()) {
                if other_expired.is_some_and(|bound| other.time_of(id) <= bound) {
                    continue;
                }
                probe.these.push(i as u32);
                probe.partners.push(id);
                others.push(parser.parse(row));
                ops.push(op);
            }
        }
        if probe.these.is_empty() {
            return Ok(probe);
        }
        let indices = UInt32Array::from_iter_values(probe.these.iter().copied());
        let this_columns = take_record_batch(chunk.rows(), &indices)?
            .columns()
            .to_vec();
        let other_columns = other.codec.convert_rows(others)?;
        let columns = match input {
            0 => [this_columns, other_columns].concat(),
            _ => [other_columns, this_columns].concat(),
        };
        let joined = RecordBatch::try_new(self.pair_schema.clone(), columns)?;
        if let Some(filter) = &self.filter {
            probe.keep = Some(evaluate(filter, &joined)?.as_boolean().clone());
        }
        probe.joined = Some(Chunk::from_ops(joined, ops));
        Ok(probe)
    }
}
