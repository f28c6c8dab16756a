//! A subtask's own measurements, and the sums of its operators' counters.

use std::sync::atomic::{AtomicI64, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::{JobMetrics, OperatorMetrics};

/// No watermark yet.
const NO_WATERMARK: i64 = i64::MIN;

/// Measurements of one subtask, updated by the task once per chunk or event (relaxed
/// atomics, no allocation), read by heartbeats and scrapes.
#[derive(Debug)]
pub struct TaskMetrics {
    /// Rows taken in (read from its source, or received).
    pub records_in: AtomicU64,
    /// Rows sent on (to the next vertex, or into its sink).
    pub records_out: AtomicU64,
    /// Arrow bytes of the chunks taken in.
    pub bytes_in: AtomicU64,
    /// Arrow bytes of the chunks sent on.
    pub bytes_out: AtomicU64,
    /// Nanoseconds spent working on input (reading its source, running its operators,
    /// writing), time blocked by backpressure included; see [`TaskSample::busy`].
    pub work_nanos: AtomicU64,
    /// The watermark that reached the task's operators (the smallest of its inputs').
    watermark_in: AtomicI64,
    /// The watermark the task sent on.
    watermark_out: AtomicI64,
    /// How full the input queue the task last read from was, in thousandths.
    input_queue_permille: AtomicU32,
    /// How full the output queue the task last wrote to was, in thousandths.
    output_queue_permille: AtomicU32,
    /// Its operators' counters (its exchange output's and sink's included).
    operators: Mutex<Vec<(String, Arc<OperatorMetrics>)>>,
    /// The job's counters, where its operators' are registered too.
    job: Arc<JobMetrics>,
}

impl Default for TaskMetrics {
    fn default() -> Self {
        TaskMetrics::new(Arc::default())
    }
}

impl TaskMetrics {
    /// A task's metrics, its operators' registered in `job` too.
    pub fn new(job: Arc<JobMetrics>) -> Self {
        TaskMetrics {
            records_in: AtomicU64::new(0),
            records_out: AtomicU64::new(0),
            bytes_in: AtomicU64::new(0),
            bytes_out: AtomicU64::new(0),
            work_nanos: AtomicU64::new(0),
            watermark_in: AtomicI64::new(NO_WATERMARK),
            watermark_out: AtomicI64::new(NO_WATERMARK),
            input_queue_permille: AtomicU32::new(0),
            output_queue_permille: AtomicU32::new(0),
            operators: Mutex::new(Vec::new()),
            job,
        }
    }
}

/// The fill of a queue holding `len` of `capacity` items, in thousandths.
fn permille(len: usize, capacity: usize) -> u32 {
    match capacity {
        0 => 0,
        c => (len.min(c) * 1000 / c) as u32,
    }
}

impl TaskMetrics {
    /// Registers the counters of the task's operator `name`, in the job's metrics too.
    pub fn operator(&self, name: &str) -> Arc<OperatorMetrics> {
        let metrics = self.job.operator(name);
        self.operators
            .lock()
            .expect("task metrics lock")
            .push((name.to_string(), metrics.clone()));
        metrics
    }

    /// The task's operators' counters, in chain order.
    pub fn operators(&self) -> Vec<(String, Arc<OperatorMetrics>)> {
        self.operators.lock().expect("task metrics lock").clone()
    }

    /// Counts rows and bytes taken in.
    pub fn taken_in(&self, rows: usize, bytes: usize) {
        OperatorMetrics::add(&self.records_in, rows as u64);
        OperatorMetrics::add(&self.bytes_in, bytes as u64);
    }

    /// Counts rows and bytes sent on.
    pub fn sent_on(&self, rows: usize, bytes: usize) {
        OperatorMetrics::add(&self.records_out, rows as u64);
        OperatorMetrics::add(&self.bytes_out, bytes as u64);
    }

    /// Counts time spent working.
    pub fn worked(&self, elapsed: Duration) {
        OperatorMetrics::add(&self.work_nanos, elapsed.as_nanos() as u64);
    }

    /// The watermark that reached the task's operators.
    pub fn set_watermark_in(&self, watermark: i64) {
        self.watermark_in.store(watermark, Ordering::Relaxed);
    }

    /// The watermark the task sent on.
    pub fn set_watermark_out(&self, watermark: i64) {
        self.watermark_out.store(watermark, Ordering::Relaxed);
    }

    /// The input queue the task just read from holds `len` of `capacity` items.
    pub fn input_queue(&self, len: usize, capacity: usize) {
        self.input_queue_permille
            .store(permille(len, capacity), Ordering::Relaxed);
    }

    /// The output queue the task just wrote to holds `len` of `capacity` items.
    pub fn output_queue(&self, len: usize, capacity: usize) {
        self.output_queue_permille
            .store(permille(len, capacity), Ordering::Relaxed);
    }

    /// The current values, its operators' counters summed.
    pub fn sample(&self) -> TaskSample {
        let watermark =
            |w: &AtomicI64| Some(w.load(Ordering::Relaxed)).filter(|w| *w != NO_WATERMARK);
        let mut sample = TaskSample {
            records_in: self.records_in.load(Ordering::Relaxed),
            records_out: self.records_out.load(Ordering::Relaxed),
            bytes_in: self.bytes_in.load(Ordering::Relaxed),
            bytes_out: self.bytes_out.load(Ordering::Relaxed),
            work_nanos: self.work_nanos.load(Ordering::Relaxed),
            watermark_in: watermark(&self.watermark_in),
            watermark_out: watermark(&self.watermark_out),
            input_queue_permille: self.input_queue_permille.load(Ordering::Relaxed),
            output_queue_permille: self.output_queue_permille.load(Ordering::Relaxed),
            ..TaskSample::default()
        };
        for (_, operator) in self.operators.lock().expect("task metrics lock").iter() {
            let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
            sample.backpressure_nanos += load(&operator.backpressure_nanos);
            sample.late_records_dropped += load(&operator.late_records_dropped);
            sample.parse_errors_skipped += load(&operator.parse_errors_skipped);
            sample.state_bytes += load(&operator.state_bytes);
        }
        sample
    }
}

/// One reading of a subtask's [`TaskMetrics`]: counters since the task started, gauges as
/// they are now.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TaskSample {
    /// Rows taken in.
    pub records_in: u64,
    /// Rows sent on.
    pub records_out: u64,
    /// Arrow bytes taken in.
    pub bytes_in: u64,
    /// Arrow bytes sent on.
    pub bytes_out: u64,
    /// Nanoseconds working, backpressure included.
    pub work_nanos: u64,
    /// Nanoseconds blocked on a full output queue.
    pub backpressure_nanos: u64,
    /// The watermark that reached the operators.
    pub watermark_in: Option<i64>,
    /// The watermark sent on.
    pub watermark_out: Option<i64>,
    /// Late rows dropped by its operators.
    pub late_records_dropped: u64,
    /// Malformed records its source skipped.
    pub parse_errors_skipped: u64,
    /// Bytes of its operators' state at the last checkpoint.
    pub state_bytes: u64,
    /// Fill of the input queue last read, in thousandths.
    pub input_queue_permille: u32,
    /// Fill of the output queue last written, in thousandths.
    pub output_queue_permille: u32,
}

impl TaskSample {
    /// Nanoseconds busy: working and not blocked by backpressure (Flink's busy time).
    pub fn busy_nanos(&self) -> u64 {
        self.work_nanos.saturating_sub(self.backpressure_nanos)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sample_sums_the_operators_and_keeps_missing_watermarks_missing() {
        let job = Arc::new(JobMetrics::default());
        let task = TaskMetrics::new(job.clone());
        let a = task.operator("v0/0:Filter");
        let b = task.operator("v0/Exchange");
        OperatorMetrics::add(&a.late_records_dropped, 3);
        OperatorMetrics::add(&b.backpressure_nanos, 2_000);
        OperatorMetrics::add(&b.late_records_dropped, 1);
        task.taken_in(10, 800);
        task.worked(Duration::from_nanos(5_000));
        task.set_watermark_out(42);
        task.output_queue(3, 4);
        let sample = task.sample();
        assert_eq!(sample.records_in, 10);
        assert_eq!(sample.bytes_in, 800);
        assert_eq!(sample.late_records_dropped, 4);
        assert_eq!(sample.busy_nanos(), 3_000);
        assert_eq!(sample.watermark_in, None);
        assert_eq!(sample.watermark_out, Some(42));
        assert_eq!(sample.output_queue_permille, 750);
        assert_eq!(job.totals().len(), 2, "registered in the job's metrics too");
    }
}
