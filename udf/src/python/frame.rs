//! The worker protocol's frames (a tag byte, a little-endian u32 length, a payload) and
//! the Arrow IPC streams inside them. See `worker.py` for the whole protocol.

use std::io::{self, Read, Write};

use arrow::array::ArrayRef;
use arrow::datatypes::Schema;
use arrow::error::ArrowError;
use arrow::ipc::reader::StreamReader;
use arrow::ipc::writer::StreamWriter;
use arrow::record_batch::RecordBatch;

/// Defines a function (TaskManager to worker).
pub(super) const DEFINE: u8 = b'D';
/// Calls a function over a batch (TaskManager to worker).
pub(super) const CALL: u8 = b'C';
/// The worker is ready.
pub(super) const HELLO: u8 = b'H';
/// A call's result.
pub(super) const RESULT: u8 = b'R';
/// A Python exception's traceback.
pub(super) const ERROR: u8 = b'E';

/// The most a worker may answer in one frame: a result column of one chunk is far
/// smaller; more is a broken worker, not a reason to allocate.
const MAX_FRAME: usize = 1 << 30;

/// Writes one frame.
pub(super) fn write_frame(to: &mut impl Write, tag: u8, payload: &[u8]) -> io::Result<()> {
    let length = u32::try_from(payload.len())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a frame over 4 GiB"))?;
    let mut header = [0u8; 5];
    header[0] = tag;
    header[1..].copy_from_slice(&length.to_le_bytes());
    to.write_all(&header)?;
    to.write_all(payload)?;
    to.flush()
}

/// Reads one frame into `payload` (reused), returning its tag.
pub(super) fn read_frame(from: &mut impl Read, payload: &mut Vec<u8>) -> io::Result<u8> {
    let mut header = [0u8; 5];
    from.read_exact(&mut header)?;
    let length = u32::from_le_bytes([header[1], header[2], header[3], header[4]]) as usize;
    if length > MAX_FRAME {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("a frame of {length} bytes"),
        ));
    }
    payload.clear();
    payload.resize(length, 0);
    from.read_exact(payload)?;
    Ok(header[0])
}

/// Appends an Arrow IPC stream of `schema` and, if given, one batch to `out`.
pub(super) fn write_ipc(
    out: &mut Vec<u8>,
    schema: &Schema,
    batch: Option<&RecordBatch>,
) -> Result<(), ArrowError> {
    let mut writer = StreamWriter::try_new(out, schema)?;
    if let Some(batch) = batch {
        writer.write(batch)?;
    }
    writer.finish()
}

/// Appends a batch as an Arrow IPC stream after its u32 length (a call's batches follow
/// each other so).
pub(super) fn write_batch(out: &mut Vec<u8>, batch: &RecordBatch) -> Result<(), ArrowError> {
    let length_at = out.len();
    out.extend_from_slice(&[0; 4]);
    write_ipc(out, &batch.schema(), Some(batch))?;
    let length = u32::try_from(out.len() - length_at - 4)
        .map_err(|_| ArrowError::IpcError("a batch over 4 GiB".into()))?;
    out[length_at..length_at + 4].copy_from_slice(&length.to_le_bytes());
    Ok(())
}

/// The one column of the one batch in an Arrow IPC stream.
pub(super) fn read_column(stream: &[u8]) -> Result<ArrayRef, String> {
    let mut reader = StreamReader::try_new(stream, None).map_err(|e| e.to_string())?;
    let batch = reader
        .next()
        .ok_or("an Arrow stream without a batch")?
        .map_err(|e| e.to_string())?;
    match batch.num_columns() {
        1 => Ok(batch.column(0).clone()),
        n => Err(format!("a batch of {n} columns, not 1")),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{Array, Int32Array};
    use arrow::datatypes::{DataType, Field};

    use super::*;

    #[test]
    fn frames_round_trip_and_a_huge_length_is_refused() {
        let mut wire = Vec::new();
        write_frame(&mut wire, CALL, b"abc").unwrap();
        write_frame(&mut wire, ERROR, b"").unwrap();
        let mut from = wire.as_slice();
        let mut payload = Vec::new();
        assert_eq!(read_frame(&mut from, &mut payload).unwrap(), CALL);
        assert_eq!(payload, b"abc");
        assert_eq!(read_frame(&mut from, &mut payload).unwrap(), ERROR);
        assert!(payload.is_empty());
        assert!(read_frame(&mut from, &mut payload).is_err());
        let hostile = [RESULT, 0xff, 0xff, 0xff, 0xff];
        let error = read_frame(&mut hostile.as_slice(), &mut payload).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::InvalidData);
    }

    #[test]
    fn a_column_round_trips_through_an_ipc_stream() {
        let schema = Schema::new(vec![Field::new("result", DataType::Int32, true)]);
        let column: ArrayRef = Arc::new(Int32Array::from(vec![Some(1), None, Some(3)]));
        let batch = RecordBatch::try_new(Arc::new(schema.clone()), vec![column.clone()]).unwrap();
        let mut stream = Vec::new();
        write_ipc(&mut stream, &schema, Some(&batch)).unwrap();
        let read = read_column(&stream).unwrap();
        assert_eq!(read.to_data(), column.to_data());
        let mut empty = Vec::new();
        write_ipc(&mut empty, &schema, None).unwrap();
        assert!(read_column(&empty).unwrap_err().contains("without a batch"));
        assert!(read_column(b"garbage").is_err());
    }
}
