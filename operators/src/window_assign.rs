//! Window TVFs: each row is paired with the window(s) it falls into, as `window_start`,
//! `window_end` and `window_time` columns.

use std::fmt;
use std::sync::Arc;

use arrow::array::{ArrayRef, TimestampMillisecondArray, UInt32Array};
use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use eddy_common::Result;
use eddy_common::chunk::Chunk;

use super::Operator;

/// The kind and sizes of a window table-valued function, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd)]
pub enum WindowKind {
    /// `TUMBLE(data, DESCRIPTOR(ts), size)`: fixed, non-overlapping windows.
    Tumble {
        /// Window length.
        size: i64,
    },
    /// `HOP(data, DESCRIPTOR(ts), slide, size)`: fixed windows starting every `slide`.
    Hop {
        /// Distance between window starts.
        slide: i64,
        /// Window length.
        size: i64,
    },
    /// `CUMULATE(data, DESCRIPTOR(ts), step, size)`: windows growing by `step` up to `size`.
    Cumulate {
        /// How much each window is longer than the previous one.
        step: i64,
        /// The longest window.
        size: i64,
    },
    /// `SESSION(data, DESCRIPTOR(ts), gap)`: windows closed by a gap of inactivity.
    Session {
        /// The gap that closes a session.
        gap: i64,
    },
}

impl fmt::Display for WindowKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WindowKind::Tumble { size } => write!(f, "TUMBLE(size={size}ms)"),
            WindowKind::Hop { slide, size } => write!(f, "HOP(slide={slide}ms, size={size}ms)"),
            WindowKind::Cumulate { step, size } => {
                write!(f, "CUMULATE(step={step}ms, size={size}ms)")
            }
            WindowKind::Session { gap } => write!(f, "SESSION(gap={gap}ms)"),
        }
    }
}

/// Assigns windows to rows by their event time.
#[derive(Debug)]
pub struct WindowAssign {
    kind: WindowKind,
    time_column: usize,
    schema: SchemaRef,
}

impl WindowAssign {
    /// Windows of `kind` over the column at `time_column`; `schema` is the input's plus the
    /// three window columns.
    pub fn new(kind: WindowKind, time_column: usize, schema: SchemaRef) -> Self {
        WindowAssign {
            kind,
            time_column,
            schema,
        }
    }
}

/// The windows (start, end) a timestamp falls into.
pub fn windows_of(kind: WindowKind, ts: i64, mut emit: impl FnMut(i64, i64)) {
    match kind {
        WindowKind::Tumble { size } => {
            let start = ts.div_euclid(size) * size;
            emit(start, start + size);
        }
        WindowKind::Hop { slide, size } => {
            let last_start = ts.div_euclid(slide) * slide;
            let mut start = last_start - size + slide;
            while start <= last_start {
                emit(start, start + size);
                start += slide;
            }
        }
        WindowKind::Cumulate { step, size } => {
            let start = ts.div_euclid(size) * size;
            let first_end = (ts.div_euclid(step) + 1) * step;
            let mut end = first_end;
            while end <= start + size {
                emit(start, end);
                end += step;
            }
        }
        WindowKind::Session { gap } => emit(ts, ts + gap),
    }
}

impl Operator for WindowAssign {
    fn process(&mut self, chunk: Chunk, out: &mut Vec<Chunk>) -> Result<()> {
        let times = crate::epoch_millis(chunk.rows().column(self.time_column))?;
        let mut indices = Vec::with_capacity(times.len());
        let mut starts = Vec::with_capacity(times.len());
        let mut ends = Vec::with_capacity(times.len());
        for (row, ts) in times.iter().enumerate() {
            let Some(ts) = ts else { continue };
            windows_of(self.kind, ts, |start, end| {
                indices.push(row as u32);
                starts.push(start);
                ends.push(end);
            });
        }
        if indices.is_empty() {
            return Ok(());
        }
        let identity = indices.len() == chunk.num_rows();
        let chunk = if identity {
            chunk
        } else {
            chunk.take(&UInt32Array::from(indices))?
        };
        let times: Vec<i64> = ends.iter().map(|e| e - 1).collect();
        let mut columns: Vec<ArrayRef> = chunk.rows().columns().to_vec();
        columns.push(Arc::new(TimestampMillisecondArray::from(starts)));
        columns.push(Arc::new(TimestampMillisecondArray::from(ends)));
        columns.push(Arc::new(TimestampMillisecondArray::from(times)));
        let rows = RecordBatch::try_new(self.schema.clone(), columns)?;
        out.push(chunk.with_rows(rows));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collect(kind: WindowKind, ts: i64) -> Vec<(i64, i64)> {
        let mut v = Vec::new();
        windows_of(kind, ts, |s, e| v.push((s, e)));
        v
    }

    #[test]
    fn assigns_flink_windows() {
        assert_eq!(collect(WindowKind::Tumble { size: 10 }, 25), vec![(20, 30)]);
        assert_eq!(collect(WindowKind::Tumble { size: 10 }, -1), vec![(-10, 0)]);
        assert_eq!(
            collect(WindowKind::Hop { slide: 5, size: 10 }, 12),
            vec![(5, 15), (10, 20)]
        );
        assert_eq!(
            collect(WindowKind::Cumulate { step: 5, size: 15 }, 7),
            vec![(0, 10), (0, 15)]
        );
        assert_eq!(collect(WindowKind::Session { gap: 3 }, 7), vec![(7, 10)]);
    }
}
