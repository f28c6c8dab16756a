//! Debezium's change envelopes in Avro (`debezium-avro-confluent`), as Flink reads them:
//! `op` `c` (create) and `r` (snapshot read) insert `after`, `u` retracts `before` and
//! inserts `after`, `d` deletes `before`.

use arrow::array::{Array, AsArray, RecordBatch, StringArray, StructArray};
use arrow::compute::interleave;
use eddy_common::Result;
use eddy_common::chunk::{Chunk, Op};
use eddy_common::metrics::OperatorMetrics;

use super::reader::{AvroReader, skipped};
use crate::format::{Decoded, LinePosition};

/// The rows of decoded envelopes, before they become changes.
pub(super) struct Changes<'a> {
    before: &'a StructArray,
    after: &'a StructArray,
    op: &'a StringArray,
    /// The record each envelope came from.
    record_of_row: &'a [u32],
}

impl<'a> Changes<'a> {
    /// The envelopes of `rows` (decoded as the envelope's columns), each from the record
    /// `record_of_row` names.
    pub(super) fn of(rows: &'a RecordBatch, record_of_row: &'a [u32]) -> Self {
        Changes {
            before: rows.column(0).as_struct(),
            after: rows.column(1).as_struct(),
            op: rows.column(2).as_string::<i32>(),
            record_of_row,
        }
    }

    /// The changes as rows of the table: an envelope that cannot be a change fails naming
    /// its record's offset, or is skipped and counted with `ignore_errors`.
    pub(super) fn decoded(
        &self,
        reader: &AvroReader,
        at: LinePosition<'_>,
        ignore_errors: bool,
        metrics: &OperatorMetrics,
        traced: bool,
    ) -> Result<Option<Decoded>> {
        let mut indices = Vec::with_capacity(self.op.len() * 2);
        let mut ops = Vec::with_capacity(self.op.len() * 2);
        let mut line_of_row = Vec::new();
        for row in 0..self.op.len() {
            let record = self.record_of_row[row] as usize;
            let changes = match self.changes(row) {
                Ok(changes) => changes,
                Err(e) if ignore_errors => {
                    skipped(at, record, &e, metrics);
                    continue;
                }
                Err(e) => return Err(reader.error(at, record, e)),
            };
            for (image, op) in changes.iter().flatten() {
                indices.push((*image, row));
                ops.push(*op);
                if traced {
                    line_of_row.push(record as u32);
                }
            }
        }
        if indices.is_empty() {
            return Ok(None);
        }
        let images = [self.before, self.after];
        let columns = (0..reader.table.fields().len())
            .map(|c| {
                let sources: Vec<&dyn Array> =
                    images.iter().map(|i| i.column(c).as_ref()).collect();
                interleave(&sources, &indices)
            })
            .collect::<Result<Vec<_>, _>>()?;
        let rows = RecordBatch::try_new(reader.table.clone(), columns)?;
        Ok(Some(Decoded {
            chunk: Chunk::from_ops(rows, ops),
            line_of_row,
            facts: Vec::new(),
        }))
    }

    /// The rows envelope `row` makes: which image (0 `before`, 1 `after`) with which op.
    fn changes(&self, row: usize) -> Result<[Option<(usize, Op)>; 2], String> {
        let op = self.op.value(row);
        let image = |which: usize| {
            let (array, name) = match which {
                0 => (self.before, "before"),
                _ => (self.after, "after"),
            };
            match array.is_valid(row) {
                true => Ok(which),
                false if which == 0 => Err(format!(
                    "the \"before\" field of {} message is null: a PostgreSQL table read by \
                     Debezium must have REPLICA IDENTITY FULL for its updates and deletes to \
                     be retracted (ALTER TABLE ... REPLICA IDENTITY FULL)",
                    if op == "u" { "UPDATE" } else { "DELETE" }
                )),
                false => Err(format!("op '{op}' without an \"{name}\" row")),
            }
        };
        Ok(match op {
            "c" | "r" => [Some((image(1)?, Op::Insert)), None],
            "u" => [
                Some((image(0)?, Op::UpdateBefore)),
                Some((image(1)?, Op::UpdateAfter)),
            ],
            "d" => [Some((image(0)?, Op::Delete)), None],
            other => {
                return Err(format!(
                    "unknown \"op\" value \"{}\" (Debezium writes c, r, u and d)",
                    other.chars().take(20).collect::<String>()
                ));
            }
        })
    }
}
