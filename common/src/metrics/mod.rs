//! Metrics measured by the tasks themselves.
//!
//! - [`OperatorMetrics`]: per operator of a subtask, records in and out, late rows
//!   dropped, bad records skipped, time blocked on a full output channel (backpressure),
//!   and the size of the operator's state at its last checkpoint;
//! - [`TaskMetrics`]: per subtask, records and bytes in and out, busy time, watermarks and
//!   queue fill, with the sums of its operators' counters, sampled as a [`TaskSample`];
//! - [`exposition`]: writing them in the Prometheus text format.

pub mod exposition;
mod task;

pub use task::{TaskMetrics, TaskSample};

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Counters of one operator in one subtask. Updated once per chunk, not per row.
#[derive(Debug, Default)]
pub struct OperatorMetrics {
    /// Rows taken in.
    pub records_in: AtomicU64,
    /// Rows emitted.
    pub records_out: AtomicU64,
    /// Rows dropped because their window had already been emitted.
    pub late_records_dropped: AtomicU64,
    /// Malformed records skipped (`'format.ignore-parse-errors' = 'true'`).
    pub parse_errors_skipped: AtomicU64,
    /// Nanoseconds spent waiting for room in a full output channel.
    pub backpressure_nanos: AtomicU64,
    /// Bytes of the operator's state at its last checkpoint: its full snapshot's size, or
    /// the operator's estimate of it when it wrote only its changes (0 before one).
    pub state_bytes: AtomicU64,
}

impl OperatorMetrics {
    /// Adds `n` to a counter.
    pub fn add(counter: &AtomicU64, n: u64) {
        if n > 0 {
            counter.fetch_add(n, Ordering::Relaxed);
        }
    }
}

/// A snapshot of one operator's counters, summed over its subtasks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OperatorTotals {
    /// `vertex/operator` name.
    pub name: String,
    /// Rows in.
    pub records_in: u64,
    /// Rows out.
    pub records_out: u64,
    /// Late rows dropped.
    pub late_records_dropped: u64,
    /// Malformed records skipped.
    pub parse_errors_skipped: u64,
    /// Milliseconds blocked by backpressure.
    pub backpressure_millis: u64,
    /// Bytes of state at the last checkpoint.
    pub state_bytes: u64,
}

/// All counters of one job.
#[derive(Debug, Default)]
pub struct JobMetrics {
    operators: Mutex<Vec<(String, Arc<OperatorMetrics>)>>,
}

impl JobMetrics {
    /// Registers (or finds) the counters of operator `name` in one subtask.
    pub fn operator(&self, name: &str) -> Arc<OperatorMetrics> {
        let metrics = Arc::new(OperatorMetrics::default());
        self.operators
            .lock()
            .expect("metrics lock")
            .push((name.to_string(), metrics.clone()));
        metrics
    }

    /// Totals per operator, in registration order, subtasks summed.
    pub fn totals(&self) -> Vec<OperatorTotals> {
        let operators = self.operators.lock().expect("metrics lock");
        let mut totals: Vec<OperatorTotals> = Vec::new();
        for (name, m) in operators.iter() {
            let index = match totals.iter().position(|t| &t.name == name) {
                Some(i) => i,
                None => {
                    totals.push(OperatorTotals {
                        name: name.clone(),
                        ..Default::default()
                    });
                    totals.len() - 1
                }
            };
            let t = &mut totals[index];
            t.records_in += m.records_in.load(Ordering::Relaxed);
            t.records_out += m.records_out.load(Ordering::Relaxed);
            t.late_records_dropped += m.late_records_dropped.load(Ordering::Relaxed);
            t.parse_errors_skipped += m.parse_errors_skipped.load(Ordering::Relaxed);
            t.backpressure_millis += m.backpressure_nanos.load(Ordering::Relaxed) / 1_000_000;
            t.state_bytes += m.state_bytes.load(Ordering::Relaxed);
        }
        totals
    }

    /// The totals as a text table.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "{:<48} {:>12} {:>12} {:>8} {:>8} {:>10} {:>12}",
            "operator", "records in", "records out", "late", "skipped", "backpr. ms", "state bytes"
        );
        for t in self.totals() {
            let _ = writeln!(
                out,
                "{:<48} {:>12} {:>12} {:>8} {:>8} {:>10} {:>12}",
                t.name,
                t.records_in,
                t.records_out,
                t.late_records_dropped,
                t.parse_errors_skipped,
                t.backpressure_millis,
                t.state_bytes
            );
        }
        out
    }
}
