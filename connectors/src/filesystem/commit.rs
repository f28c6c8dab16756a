//! Partition commit, as Flink's filesystem sink does it: once a partition's rows are
//! committed and the trigger says the partition is complete, its policy runs (here the
//! `success-file` policy: an empty `_SUCCESS` file in the partition's directory).
//!
//! - `'sink.partition-commit.trigger' = 'process-time'` (the default): a partition is due
//!   once the clock passes the time it was first written (since its last commit) plus
//!   `'sink.partition-commit.delay'`.
//! - `'partition-time'`: once the watermark passes the time its values name (extracted
//!   with `'partition.time-extractor.timestamp-pattern'`, read as UTC) plus the delay.
//!
//! Partitions written again after their commit are committed again. At the end of the
//! input every partition not yet committed is.

use std::collections::BTreeMap;
use std::time::Duration;

use eddy_common::event::Timestamp;
use eddy_common::state::{StateReader, StateWriter};
use eddy_common::{EddyError, Result};

use super::partitions::unescape;

/// `'sink.partition-commit.success-file.name'`'s default.
pub const SUCCESS_FILE: &str = "_SUCCESS";

/// When a partition is complete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommitTrigger {
    /// The clock passed the partition's first write plus the delay.
    ProcessTime,
    /// The watermark passed the partition's time plus the delay.
    PartitionTime(TimeExtractor),
}

/// How partitions are committed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionCommit {
    /// When.
    pub trigger: CommitTrigger,
    /// How long after the trigger's time.
    pub delay: Duration,
    /// The name of the file the `success-file` policy writes.
    pub success_file: String,
}

/// The time a partition stands for, from its values (Flink's default extractor).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimeExtractor {
    /// The partition keys, in order.
    pub keys: Vec<String>,
    /// `'partition.time-extractor.timestamp-pattern'`: `$key` stands for a key's value
    /// (without one, the first key's value is the time).
    pub pattern: Option<String>,
}

impl TimeExtractor {
    /// The time (ms since the epoch, UTC) of the partition in directory `directory`.
    pub fn partition_time(&self, directory: &str) -> Result<Timestamp> {
        let values: Vec<String> = directory
            .split('/')
            .filter_map(|c| c.split_once('=').map(|(_, v)| unescape(v)))
            .collect();
        let text = match &self.pattern {
            None => values.first().cloned().unwrap_or_default(),
            Some(pattern) => {
                let mut text = pattern.clone();
                for (key, value) in self.keys.iter().zip(&values) {
                    text = text.replace(&format!("${key}"), value);
                }
                text
            }
        };
        parse_partition_time(&text).ok_or_else(|| {
            EddyError::Internal(format!(
                "partition '{directory}': its time '{text}' is not 'yyyy-MM-dd HH:mm:ss' or \
             'yyyy-MM-dd' (see 'partition.time-extractor.timestamp-pattern')"
            ))
        })
    }
}

/// Parses `y-M-d` with an optional ` H:m:s` and fraction, numbers of 1 or 2 digits (the
/// year up to 10), as Flink's default partition time formatter does leniently.
fn parse_partition_time(text: &str) -> Option<Timestamp> {
    let (date, time) = match text.split_once(' ') {
        Some((date, time)) => (date, Some(time)),
        None => (text, None),
    };
    let mut date = date.split('-');
    let year: i64 = number(date.next()?, 10)?;
    let month: i64 = number(date.next()?, 2)?;
    let day: i64 = number(date.next()?, 2)?;
    if date.next().is_some() {
        return None;
    }
    let mut millis = 0;
    if let Some(time) = time {
        let (time, fraction) = match time.split_once('.') {
            Some((time, fraction)) => (time, Some(fraction)),
            None => (time, None),
        };
        let mut parts = time.split(':');
        let hour = number(parts.next()?, 2)?;
        let minute = number(parts.next()?, 2)?;
        let second = number(parts.next()?, 2)?;
        if parts.next().is_some() {
            return None;
        }
        millis = ((hour * 60 + minute) * 60 + second) * 1000;
        if let Some(fraction) = fraction {
            number(fraction, 9)?;
            let digits: String = fraction.chars().chain("000".chars()).take(3).collect();
            millis += digits.parse::<i64>().ok()?;
        }
    }
    // Lenient: months and days past their end roll over, as Java's LENIENT resolver does.
    let (year, month) = (
        year + (month - 1).div_euclid(12),
        (month - 1).rem_euclid(12) + 1,
    );
    let days = days_from_civil(year, month, 1) + day - 1;
    Some(days * 86_400_000 + millis)
}

fn number(text: &str, max_digits: usize) -> Option<i64> {
    let ok =
        !text.is_empty() && text.len() <= max_digits && text.bytes().all(|b| b.is_ascii_digit());
    ok.then(|| text.parse().ok()).flatten()
}

/// Days since 1970-01-01 of a proleptic Gregorian date.
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Partitions a sink subtask wrote whose commit is still to come, with the time each was
/// first written since its last commit.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct PendingPartitions {
    created: BTreeMap<String, Timestamp>,
}

impl PendingPartitions {
    /// Rows were written into `directory` at `now`.
    pub fn written(&mut self, directory: &str, now: Timestamp) {
        if !self.created.contains_key(directory) {
            self.created.insert(directory.to_string(), now);
        }
    }

    /// Whether any partition waits for its commit.
    pub fn is_empty(&self) -> bool {
        self.created.is_empty()
    }

    /// Takes the partitions due by `commit`'s trigger at `now` with `watermark`.
    pub fn take_due(
        &mut self,
        commit: &PartitionCommit,
        now: Timestamp,
        watermark: Option<Timestamp>,
    ) -> Result<Vec<String>> {
        let delay = commit.delay.as_millis() as i64;
        let mut due = Vec::new();
        for (directory, created) in &self.created {
            let ready = match &commit.trigger {
                CommitTrigger::ProcessTime => now > created.saturating_add(delay),
                CommitTrigger::PartitionTime(extractor) => match watermark {
                    Some(watermark) => {
                        watermark > extractor.partition_time(directory)?.saturating_add(delay)
                    }
                    None => false,
                },
            };
            if ready {
                due.push(directory.clone());
            }
        }
        for directory in &due {
            self.created.remove(directory);
        }
        Ok(due)
    }

    /// Takes every partition (the input ended).
    pub fn take_all(&mut self) -> Vec<String> {
        std::mem::take(&mut self.created).into_keys().collect()
    }

    /// Appends the pending partitions to a snapshot.
    pub fn save(&self, out: &mut StateWriter) {
        out.u64(self.created.len() as u64);
        for (directory, created) in &self.created {
            out.bytes(directory.as_bytes()).i64(*created);
        }
    }

    /// Adds the pending partitions a snapshot holds (the earliest first write wins).
    pub fn load(&mut self, input: &mut StateReader<'_>) -> Result<()> {
        for _ in 0..input.count(9)? {
            let directory = std::str::from_utf8(input.bytes()?)
                .map_err(|_| EddyError::Internal("a partition name is not UTF-8".into()))?
                .to_string();
            let created = input.i64()?;
            let entry = self.created.entry(directory).or_insert(created);
            *entry = (*entry).min(created);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: i64 = 86_400_000;

    #[test]
    fn partition_times_parse_as_flink_default_formatter_does() {
        assert_eq!(parse_partition_time("1970-01-01"), Some(0));
        assert_eq!(
            parse_partition_time("1970-01-02 00:00:01"),
            Some(DAY + 1000)
        );
        assert_eq!(
            parse_partition_time("2024-3-1 1:2:3.5"),
            Some(1_709_254_923_500)
        );
        assert_eq!(
            parse_partition_time("2024-02-30"),
            parse_partition_time("2024-03-01")
        );
        assert_eq!(
            parse_partition_time("2024-13-01"),
            parse_partition_time("2025-01-01")
        );
        assert_eq!(parse_partition_time("2024-01-01 10:00"), None);
        assert_eq!(parse_partition_time("yesterday"), None);
    }

    #[test]
    fn the_pattern_names_keys() {
        let extractor = TimeExtractor {
            keys: vec!["dt".into(), "hm".into()],
            pattern: Some("$dt $hm:00".into()),
        };
        let time = extractor
            .partition_time("dt=1970-01-02/hm=10%3A30")
            .unwrap();
        assert_eq!(time, DAY + (10 * 60 + 30) * 60_000);
        let first_key = TimeExtractor {
            keys: vec!["dt".into()],
            pattern: None,
        };
        assert_eq!(first_key.partition_time("dt=1970-01-03").unwrap(), 2 * DAY);
        let error = first_key.partition_time("dt=soon").unwrap_err().to_string();
        assert!(error.contains("partition 'dt=soon'"), "{error}");
    }

    #[test]
    fn partitions_are_due_by_their_trigger() {
        let processing = PartitionCommit {
            trigger: CommitTrigger::ProcessTime,
            delay: Duration::from_secs(10),
            success_file: SUCCESS_FILE.into(),
        };
        let mut pending = PendingPartitions::default();
        pending.written("dt=a", 1_000);
        pending.written("dt=a", 5_000);
        pending.written("dt=b", 6_000);
        assert!(
            pending
                .take_due(&processing, 11_000, None)
                .unwrap()
                .is_empty()
        );
        assert_eq!(
            pending.take_due(&processing, 11_001, None).unwrap(),
            ["dt=a"]
        );
        pending.written("dt=a", 12_000);
        assert_eq!(pending.take_all(), ["dt=a", "dt=b"]);

        let by_time = PartitionCommit {
            trigger: CommitTrigger::PartitionTime(TimeExtractor {
                keys: vec!["dt".into()],
                pattern: None,
            }),
            delay: Duration::from_millis(DAY as u64),
            success_file: SUCCESS_FILE.into(),
        };
        pending.written("dt=1970-01-01", 0);
        pending.written("dt=1970-01-02", 0);
        assert!(pending.take_due(&by_time, 0, None).unwrap().is_empty());
        assert!(pending.take_due(&by_time, 0, Some(DAY)).unwrap().is_empty());
        assert_eq!(
            pending.take_due(&by_time, 0, Some(DAY + 1)).unwrap(),
            ["dt=1970-01-01"]
        );

        let mut out = StateWriter::new();
        pending.save(&mut out);
        let bytes = out.finish();
        let mut restored = PendingPartitions::default();
        restored
            .load(&mut StateReader::new(&bytes, "test"))
            .unwrap();
        assert_eq!(restored, pending);
    }
}
