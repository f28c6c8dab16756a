//! Slows a sink to a number of rows per second (a deliberately slow sink, for tests and
//! backpressure experiments).

use std::future::Future;
use std::time::{Duration, Instant};

/// Tracks rows taken against a rate.
#[derive(Debug)]
pub struct Throttle {
    rows_per_second: u64,
    started: Instant,
    taken: u64,
}

impl Throttle {
    /// A throttle of `rows_per_second` (`None` for no throttle).
    pub fn new(rows_per_second: Option<u64>) -> Option<Self> {
        rows_per_second
            .filter(|r| *r > 0)
            .map(|rows_per_second| Throttle {
                rows_per_second,
                started: Instant::now(),
                taken: 0,
            })
    }

    /// Counts `rows`; returns how long to wait before taking more.
    pub fn take(&mut self, rows: usize) -> Option<Duration> {
        self.taken += rows as u64;
        let due = Duration::from_secs_f64(self.taken as f64 / self.rows_per_second as f64);
        due.checked_sub(self.started.elapsed())
    }
}

/// Counts `rows` against an optional throttle; the future waits as long as it says.
pub fn pace(
    throttle: Option<&mut Throttle>,
    rows: usize,
) -> impl Future<Output = ()> + Send + 'static {
    let pause = throttle.and_then(|t| t.take(rows));
    async move {
        if let Some(pause) = pause {
            tokio::time::sleep(pause).await;
        }
    }
}
