//! Job states and outcomes.

use std::sync::Arc;
use std::time::Duration;

use eddy_common::metrics::JobMetrics;

/// How an embedded run ended (failures are errors).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobStatus {
    /// Every source ended and every task finished.
    Finished,
    /// Stopped on request (Ctrl-C).
    Cancelled,
}

/// How a job ended.
#[derive(Debug)]
pub struct JobOutcome {
    /// Finished or cancelled (failures are errors).
    pub status: JobStatus,
    /// Its counters.
    pub metrics: Arc<JobMetrics>,
    /// From the start of scheduling until every task was deployed.
    pub time_to_running: Duration,
    /// From the start of scheduling to the end.
    pub duration: Duration,
}
