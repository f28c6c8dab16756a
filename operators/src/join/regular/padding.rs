//! The emit step: the rows an outer, semi or anti join emits for a chunk, in order — pairs,
//! rows padded with NULLs for the side they did not join, and a semi or anti join's left
//! rows.

use arrow::array::{Array, ArrayRef, UInt32Array, new_null_array};
use arrow::compute::take_record_batch;
use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use eddy_common::chunk::{Chunk, Op};
use eddy_common::{EddyError, Result};

use super::StreamingJoin;
use super::probe::Probe;
use crate::join::Filtering;
use crate::join::side::{JoinSide, Unmatched};

/// One row an outer, semi or anti join emits for a chunk, in order.
#[derive(Debug, Clone, Copy)]
pub(super) enum Emitted {
    /// The joined pair at this index.
    Joined(usize),
    /// A row of the chunk, padded with NULLs, with this change.
    Padded(usize, Op),
    /// A held row of the other side (its entry), padded with NULLs, with this change.
    PartnerPadded(u32, Op),
    /// A left row of the chunk that joins (a semi join emits it), with this change.
    Matched(usize, Op),
}

impl StreamingJoin {
    /// The chunk of rows `emitted` lists for `chunk` (from input `input`), if any.
    pub(super) fn emit(
        &self,
        input: usize,
        chunk: &Chunk,
        probe: &Probe,
        emitted: &[Emitted],
    ) -> Result<Option<Chunk>> {
        let other = &self.sides[1 - input];
        match self.kind.filtering() {
            Some(filtering) => filtered_output(filtering, &self.schema, chunk, other, emitted),
            None if emitted.is_empty() => Ok(None),
            None => {
                let output = OuterOutput {
                    schema: &self.schema,
                    input,
                    chunk,
                    joined: probe.joined.as_ref(),
                    other,
                };
                output.build(emitted).map(Some)
            }
        }
    }

    /// Held rows of input `input`, padded with NULLs for the other side's columns.
    pub(super) fn padded_rows(&self, input: usize, rows: &Unmatched) -> Result<Chunk> {
        let side = &self.sides[input];
        let parser = side.codec.parser();
        let own = side
            .codec
            .convert_rows(rows.rows().map(|r| parser.parse(r)))?;
        let n = own.first().map_or(0, |c| c.len());
        let width = self.schema.fields().len();
        let own_start = match input {
            0 => 0,
            _ => width - own.len(),
        };
        let columns: Vec<ArrayRef> = (0..width)
            .map(|f| match f.checked_sub(own_start) {
                Some(i) if i < own.len() => own[i].clone(),
                _ => new_null_array(self.schema.field(f).data_type(), n),
            })
            .collect();
        Ok(Chunk::inserts(RecordBatch::try_new(
            self.schema.clone(),
            columns,
        )?))
    }
}

/// Held rows of `side`, by entry, as columns.
fn held_columns(side: &JoinSide, entries: &[u32]) -> Result<Vec<ArrayRef>> {
    let parser = side.codec.parser();
    let rows: Vec<_> = entries
        .iter()
        .map(|id| parser.parse(side.entry_row(*id)))
        .collect();
    Ok(side.codec.convert_rows(rows)?)
}

/// The left rows a semi or anti join emits for a chunk, in order: an anti join's are the
/// rows a LEFT JOIN would pad; a semi join's are the chunk's rows that join (`Matched`)
/// and held left rows whose first match comes or last match goes (the opposite of the
/// padded rows a LEFT JOIN emits for them).
fn filtered_output(
    filtering: Filtering,
    schema: &SchemaRef,
    chunk: &Chunk,
    held: &JoinSide,
    emitted: &[Emitted],
) -> Result<Option<Chunk>> {
    let mut rows = Vec::new();
    let mut partners = Vec::new();
    let mut ops = Vec::new();
    for e in emitted {
        match (*e, filtering) {
            (Emitted::Padded(i, op), Filtering::Anti)
            | (Emitted::Matched(i, op), Filtering::Semi) => {
                rows.push(i as u32);
                ops.push(op);
            }
            (Emitted::PartnerPadded(id, op), _) => {
                partners.push(id);
                ops.push(match (filtering, op.is_accumulate()) {
                    (Filtering::Anti, _) => op,
                    (Filtering::Semi, true) => Op::Delete,
                    (Filtering::Semi, false) => Op::Insert,
                });
            }
            _ => {}
        }
    }
    // One chunk's rows are all of one input: its own left rows, or held ones.
    let columns = match (rows.is_empty(), partners.is_empty()) {
        (true, true) => return Ok(None),
        (false, true) => take_record_batch(chunk.rows(), &UInt32Array::from(rows))?
            .columns()
            .to_vec(),
        (true, false) => held_columns(held, &partners)?,
        (false, false) => {
            return Err(EddyError::Internal(
                "a semi join emitted rows of both inputs for one chunk".into(),
            ));
        }
    };
    Ok(Some(Chunk::from_ops(
        RecordBatch::try_new(schema.clone(), columns)?,
        ops,
    )))
}

/// What an outer join's output for one chunk is made of.
struct OuterOutput<'a> {
    schema: &'a SchemaRef,
    /// The input the chunk came from.
    input: usize,
    chunk: &'a Chunk,
    /// The pairs the probe found.
    joined: Option<&'a Chunk>,
    /// The other side.
    other: &'a JoinSide,
}

impl OuterOutput<'_> {
    /// The rows in the order `emitted` lists them: joined pairs, the chunk's rows padded,
    /// the other side's rows padded.
    fn build(&self, emitted: &[Emitted]) -> Result<Chunk> {
        let width = self.schema.fields().len();
        let padded = self.padded_chunk_rows(emitted)?;
        let partners = self.padded_partner_rows(emitted)?;
        let empty = self.nulls(0..width, 0);
        let joined_columns = self.joined.map_or(&empty[..], |j| j.rows().columns());
        // Interleave the three in order.
        let (mut next_padded, mut next_partner) = (0, 0);
        let mut order = Vec::with_capacity(emitted.len());
        let mut ops = Vec::with_capacity(emitted.len());
        for e in emitted {
            match *e {
                Emitted::Joined(pair) => {
                    order.push((0, pair));
                    ops.push(self.joined.map_or(Op::Insert, |j| j.op(pair)));
                }
                Emitted::Padded(_, op) => {
                    order.push((1, next_padded));
                    next_padded += 1;
                    ops.push(op);
                }
                Emitted::PartnerPadded(_, op) => {
                    order.push((2, next_partner));
                    next_partner += 1;
                    ops.push(op);
                }
                Emitted::Matched(..) => {
                    return Err(EddyError::Internal(
                        "an outer join emitted a semi join's row".into(),
                    ));
                }
            }
        }
        let columns = (0..width)
            .map(|f| {
                let sources: [&dyn Array; 3] = [
                    joined_columns[f].as_ref(),
                    padded[f].as_ref(),
                    partners[f].as_ref(),
                ];
                Ok(arrow::compute::interleave(&sources, &order)?)
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Chunk::from_ops(
            RecordBatch::try_new(self.schema.clone(), columns)?,
            ops,
        ))
    }

    /// NULL columns of the output's `fields`, `n` rows long.
    fn nulls(&self, fields: std::ops::Range<usize>, n: usize) -> Vec<ArrayRef> {
        fields
            .map(|f| new_null_array(self.schema.field(f).data_type(), n))
            .collect()
    }

    /// The output's fields of the chunk's side, and of the other side.
    fn fields(&self) -> [std::ops::Range<usize>; 2] {
        let this_width = self.chunk.rows().num_columns();
        let width = self.schema.fields().len();
        match self.input {
            0 => [0..this_width, this_width..width],
            _ => [width - this_width..width, 0..width - this_width],
        }
    }

    /// The chunk's rows `emitted` pads, padded.
    fn padded_chunk_rows(&self, emitted: &[Emitted]) -> Result<Vec<ArrayRef>> {
        let padded: Vec<u32> = emitted
            .iter()
            .filter_map(|e| match e {
                Emitted::Padded(i, _) => Some(*i as u32),
                _ => None,
            })
            .collect();
        let mut columns = self.nulls(0..self.schema.fields().len(), padded.len());
        let taken = take_record_batch(self.chunk.rows(), &UInt32Array::from(padded))?;
        let [this_fields, _] = self.fields();
        for (f, column) in this_fields.zip(taken.columns()) {
            columns[f] = column.clone();
        }
        Ok(columns)
    }

    /// The other side's rows `emitted` pads, padded.
    fn padded_partner_rows(&self, emitted: &[Emitted]) -> Result<Vec<ArrayRef>> {
        let partners: Vec<u32> = emitted
            .iter()
            .filter_map(|e| match e {
                Emitted::PartnerPadded(id, _) => Some(*id),
                _ => None,
            })
            .collect();
        let mut columns = self.nulls(0..self.schema.fields().len(), partners.len());
        if !partners.is_empty() {
            let [_, other_fields] = self.fields();
            for (f, column) in other_fields.zip(held_columns(self.other, &partners)?) {
                columns[f] = column;
            }
        }
        Ok(columns)
    }
}
