//! Checkpointing options, named as in Flink.

use std::time::Duration;

use crate::{EddyError, Result};

/// How checkpoints treat records that cross a barrier.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckpointingMode {
    /// Aligned barriers: every record affects state exactly once.
    ExactlyOnce,
    /// No alignment: after a recovery some records are processed twice.
    AtLeastOnce,
}

/// `execution.checkpointing.*`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckpointConfig {
    /// Time between checkpoints; `None` disables checkpointing (at-most-once).
    pub interval: Option<Duration>,
    /// Exactly-once or at-least-once.
    pub mode: CheckpointingMode,
    /// A checkpoint not complete after this is aborted.
    pub timeout: Duration,
    /// Least time between the end of one checkpoint and the start of the next.
    pub min_pause: Duration,
    /// Consecutive failed checkpoints tolerated before the job fails.
    pub tolerable_failures: u32,
    /// Completed checkpoints kept (older ones are deleted).
    pub retained: usize,
    /// Unaligned checkpoints (exactly-once only).
    pub unaligned: bool,
    /// Snapshots hold only what changed since the previous completed checkpoint where
    /// the operator can (`GROUP BY`, joins), extending its earlier files.
    pub incremental: bool,
    /// Where checkpoints go (`file:///...`, a path, or `s3://bucket/prefix`); `None` uses the
    /// cluster's default.
    pub directory: Option<String>,
}

impl Default for CheckpointConfig {
    /// The declared defaults ([`super::options::JOB_OPTIONS`]).
    fn default() -> Self {
        super::JobConfig::default().checkpoints
    }
}

impl CheckpointConfig {
    /// Every field before the declared defaults are applied.
    pub(super) fn unset() -> Self {
        CheckpointConfig {
            interval: None,
            mode: CheckpointingMode::ExactlyOnce,
            timeout: Duration::ZERO,
            min_pause: Duration::ZERO,
            tolerable_failures: 0,
            retained: 0,
            unaligned: false,
            incremental: false,
            directory: None,
        }
    }
}

/// Parses a duration as Flink writes them: `500ms`, `1s`, `2 min`, `1h`, or plain
/// milliseconds.
pub fn parse_duration(key: &str, value: &str) -> Result<Duration> {
    let text = value.trim().to_ascii_lowercase();
    let split = text
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: f64 = number.parse().map_err(|_| bad_duration(key, value))?;
    let millis = match unit.trim() {
        "" | "ms" | "milli" | "millis" | "milliseconds" => number,
        "s" | "sec" | "secs" | "second" | "seconds" => number * 1e3,
        "m" | "min" | "mins" | "minute" | "minutes" => number * 60e3,
        "h" | "hour" | "hours" => number * 3600e3,
        "d" | "day" | "days" => number * 86_400e3,
        _ => return Err(bad_duration(key, value)),
    };
    Duration::try_from_secs_f64(millis / 1e3).map_err(|_| bad_duration(key, value))
}

fn bad_duration(key: &str, value: &str) -> EddyError {
    EddyError::Config(format!(
        "'{key}' = '{value}': expected a duration such as 500ms, 1s, 2min or 1h"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("k", "1s").unwrap(), Duration::from_secs(1));
        assert_eq!(
            parse_duration("k", "250 ms").unwrap(),
            Duration::from_millis(250)
        );
        assert_eq!(
            parse_duration("k", "2min").unwrap(),
            Duration::from_secs(120)
        );
        assert_eq!(
            parse_duration("k", "1500").unwrap(),
            Duration::from_millis(1500)
        );
        assert!(parse_duration("k", "soon").is_err());
    }

    #[test]
    fn a_duration_too_long_to_hold_is_an_error() {
        let error = parse_duration("k", "99999999999999999999999999d").unwrap_err();
        assert!(error.to_string().contains("'k'"), "{error}");
    }
}
