//! Chunks on the wire: an Arrow IPC stream holding the schema and one batch, with the
//! row kinds of an updating chunk in a trailing `__op` UInt8 column.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, UInt8Array};
use arrow::buffer::Buffer;
use arrow::datatypes::{DataType, Field, Schema};
use arrow::ipc::reader::StreamDecoder;
use arrow::ipc::writer::StreamWriter;
use arrow::record_batch::RecordBatch;

use crate::chunk::{Chunk, Op};
use crate::{EddyError, Result};

const OPS_COLUMN: &str = "__op";

/// Encodes a chunk.
pub fn encode_chunk(chunk: &Chunk) -> Result<Vec<u8>> {
    let rows = chunk.rows();
    let batch = match chunk.ops() {
        None => rows.clone(),
        Some(ops) => {
            let mut fields: Vec<Arc<Field>> = rows.schema().fields().iter().cloned().collect();
            fields.push(Arc::new(Field::new(OPS_COLUMN, DataType::UInt8, false)));
            let mut columns: Vec<ArrayRef> = rows.columns().to_vec();
            columns.push(Arc::new(ops.clone()));
            RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)?
        }
    };
    let mut buffer = Vec::with_capacity(batch.get_array_memory_size() + 512);
    let mut writer = StreamWriter::try_new(&mut buffer, &batch.schema())?;
    writer.write(&batch)?;
    writer.finish()?;
    drop(writer);
    Ok(buffer)
}

/// Decodes a chunk encoded by [`encode_chunk`]. The bytes come from the network, so
/// lengths they claim are never trusted: the push decoder only consumes bytes present.
pub fn decode_chunk(bytes: Vec<u8>) -> Result<Chunk> {
    // arrow-ipc panics on some malformed messages (e.g. an integer type of width 0) instead
    // of failing: a hostile or corrupted frame must fail the call, not the process.
    std::panic::catch_unwind(move || decode_arrow(bytes)).unwrap_or_else(|panic| {
        let reason = crate::error::panic_message(&*panic, "the Arrow decoder panicked");
        Err(EddyError::Frame(format!(
            "malformed Arrow IPC message: {reason}"
        )))
    })
}

fn decode_arrow(bytes: Vec<u8>) -> Result<Chunk> {
    let mut buffer = Buffer::from(bytes);
    let mut decoder = StreamDecoder::new();
    let mut batch = None;
    while !buffer.is_empty() && batch.is_none() {
        let before = buffer.len();
        batch = decoder.decode(&mut buffer)?;
        if buffer.len() == before && batch.is_none() {
            break;
        }
    }
    let batch =
        batch.ok_or_else(|| EddyError::Frame("a data frame holds no complete batch".into()))?;
    let schema = batch.schema();
    let last = schema.fields().len().checked_sub(1);
    match last {
        Some(i) if schema.field(i).name() == OPS_COLUMN => {
            let ops = batch
                .column(i)
                .as_any()
                .downcast_ref::<UInt8Array>()
                .ok_or_else(|| EddyError::Frame("the __op column is not UInt8".into()))?
                .clone();
            let mut rows = batch;
            rows.remove_column(i);
            if ops.len() != rows.num_rows() {
                return Err(EddyError::Frame(
                    "a data frame's ops do not match its rows".into(),
                ));
            }
            // A row kind that is none of +I -U +U -D is refused, never taken for an insert.
            if ops.null_count() > 0 || ops.values().iter().any(|op| *op > Op::Delete as u8) {
                let row = (0..ops.len())
                    .find(|&i| ops.is_null(i) || ops.value(i) > Op::Delete as u8)
                    .unwrap_or(0);
                return Err(EddyError::Frame(format!(
                    "a data frame's row {row} has no valid row kind ({:?})",
                    (!ops.is_null(row)).then(|| ops.value(row))
                )));
            }
            Ok(Chunk::with_ops(rows, ops))
        }
        _ => Ok(Chunk::inserts(batch)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int64Array, StringArray};

    #[test]
    fn a_row_kind_that_is_none_of_the_four_is_refused() {
        let schema = Arc::new(Schema::new(vec![Field::new("v", DataType::Int64, false)]));
        let rows =
            RecordBatch::try_new(schema, vec![Arc::new(Int64Array::from(vec![1, 2]))]).unwrap();
        let chunk = Chunk::with_ops(rows, UInt8Array::from(vec![0, 7]));
        let error = decode_chunk(encode_chunk(&chunk).unwrap()).unwrap_err();
        assert!(
            error
                .to_string()
                .contains("row 1 has no valid row kind (Some(7))"),
            "{error}"
        );
    }

    /// Rows of a string key and an integer value.
    fn rows(keys: Vec<Option<&str>>, values: Vec<i64>) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![
            Field::new("k", DataType::Utf8, true),
            Field::new("v", DataType::Int64, true),
        ]));
        let columns: Vec<arrow::array::ArrayRef> = vec![
            Arc::new(StringArray::from(keys)),
            Arc::new(Int64Array::from(values)),
        ];
        RecordBatch::try_new(schema, columns).unwrap()
    }

    #[test]
    fn round_trips_rows_and_ops() {
        let rows = rows(vec![Some("a"), None], vec![1, 2]);
        let chunk = Chunk::from_ops(rows.clone(), vec![Op::UpdateBefore, Op::UpdateAfter]);
        let decoded = decode_chunk(encode_chunk(&chunk).unwrap()).unwrap();
        assert_eq!(decoded.rows(), &rows);
        assert_eq!(decoded.op(0), Op::UpdateBefore);
        assert_eq!(decoded.op(1), Op::UpdateAfter);
        let inserts = decode_chunk(encode_chunk(&Chunk::inserts(rows.clone())).unwrap()).unwrap();
        assert!(inserts.is_append_only());
        assert!(decode_chunk(b"garbage".to_vec()).is_err());
        // A frame claiming a huge message is refused without allocating for it.
        let mut huge = vec![0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f];
        huge.extend_from_slice(&[0; 16]);
        assert!(decode_chunk(huge).is_err());
        let mut truncated = encode_chunk(&chunk).unwrap();
        truncated.truncate(truncated.len() / 2);
        assert!(decode_chunk(truncated).is_err());
    }

    fn sample() -> Chunk {
        let rows = rows(vec![Some("a"), None, Some("ccc")], vec![1, 2, 3]);
        Chunk::from_ops(rows, vec![Op::Insert, Op::UpdateBefore, Op::UpdateAfter])
    }

    /// Regression (found by `corrupted_frames_never_panic`): one byte of the schema set to
    /// 22 made arrow-ipc panic on an integer type of width 0. Every position, a few values.
    #[test]
    fn single_byte_corruptions_fail_cleanly() {
        let frame = encode_chunk(&sample()).unwrap();
        for i in 0..frame.len() {
            for value in [0, 1, 22, 0x7f, 0x80, 0xff] {
                let mut bytes = frame.clone();
                bytes[i] = value;
                bytes.extend([0; 15]);
                let _ = decode_chunk(bytes);
            }
        }
        let mut width_zero = frame.clone();
        let malformed = (0..frame.len()).find_map(|i| {
            width_zero.clone_from(&frame);
            width_zero[i] = 22;
            match decode_chunk(width_zero.clone()) {
                Err(EddyError::Frame(m)) if m.contains("malformed Arrow IPC") => Some(m),
                _ => None,
            }
        });
        assert!(
            malformed.is_some(),
            "no corruption reached the Arrow decoder's panic"
        );
    }

    use proptest::collection::vec;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(crate::fuzz::config("wire::hostile_frames"))]

        /// Whatever arrives in a data frame, decoding it fails cleanly or gives a chunk.
        #[test]
        fn hostile_frames_never_panic(bytes in vec(any::<u8>(), 0..4096)) {
            let _ = decode_chunk(bytes);
        }

        /// A valid frame with bytes overwritten, cut short or lengthened.
        #[test]
        fn corrupted_frames_never_panic(
            edits in vec((any::<prop::sample::Index>(), any::<u8>()), 1..12),
            keep in any::<prop::sample::Index>(),
            tail in vec(any::<u8>(), 0..64),
        ) {
            let mut bytes = encode_chunk(&sample()).unwrap();
            for (at, value) in edits {
                let i = at.index(bytes.len());
                bytes[i] = value;
            }
            bytes.truncate(keep.index(bytes.len() + 1).max(1));
            bytes.extend(tail);
            if let Ok(chunk) = decode_chunk(bytes) {
                // A chunk that decodes is whole: every row has its op.
                for row in 0..chunk.num_rows() {
                    let _ = chunk.op(row);
                }
            }
        }
    }
}
