//! Job options, set in a script with `SET 'key' = 'value'` or from the command line.

use std::collections::BTreeMap;

pub mod checkpointing;
pub mod restart;

use crate::{EddyError, Result};
use checkpointing::{CheckpointConfig, CheckpointingMode, parse_duration};
use restart::{RestartOptions, RestartStrategy};

/// Default parallelism of every operator (`parallelism.default`).
pub const PARALLELISM: &str = "parallelism.default";
/// Number of key groups keyed state is split into (`pipeline.max-parallelism`).
pub const MAX_PARALLELISM: &str = "pipeline.max-parallelism";
/// Most rows a source puts into one chunk, and so the most rows an aggregate takes in
/// before it emits its changes (`table.exec.mini-batch.size`).
pub const BATCH_SIZE: &str = "table.exec.mini-batch.size";
/// A name for the job, shown in logs (`pipeline.name`).
pub const PIPELINE_NAME: &str = "pipeline.name";
/// How long keyed state of unbounded GROUP BYs, regular joins, Top-Ns and deduplications
/// lives after its last write, by the wall clock (`table.exec.state.ttl`; 0: for good).
pub const STATE_TTL: &str = "table.exec.state.ttl";
/// Whether changelog sources may deliver a change more than once (Debezium's
/// at-least-once delivery): each is then followed by a normalization on its primary key.
pub const CDC_EVENTS_DUPLICATE: &str = "table.exec.source.cdc-events-duplicate";

const KNOWN_KEYS: &[&str] = &[
    PARALLELISM,
    MAX_PARALLELISM,
    BATCH_SIZE,
    PIPELINE_NAME,
    STATE_TTL,
    CDC_EVENTS_DUPLICATE,
    "execution.checkpointing.interval",
    "execution.checkpointing.mode",
    "execution.checkpointing.timeout",
    "execution.checkpointing.min-pause",
    "execution.checkpointing.tolerable-failed-checkpoints",
    "execution.checkpointing.num-retained",
    "execution.checkpointing.unaligned",
    "execution.checkpointing.incremental",
    "state.backend.incremental",
    "execution.checkpointing.dir",
    "state.checkpoints.dir",
];

/// The cache a lookup join keeps of its table (Flink's `lookup.cache` = `PARTIAL`), as
/// the table's options ask.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LookupCache {
    /// Most keys kept; the oldest go first.
    pub max_rows: usize,
    /// A key is read again this long after it was read.
    pub expire_after_write: Option<std::time::Duration>,
    /// A key is read again when not used for this long.
    pub expire_after_access: Option<std::time::Duration>,
    /// Keys the table does not hold are kept too (as holding nothing).
    pub cache_missing_keys: bool,
}

/// The options of one job, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct JobConfig {
    /// Parallelism of every operator that has no reason to run with less.
    pub parallelism: usize,
    /// Number of key groups (the most a keyed operator can ever be scaled to).
    pub max_parallelism: usize,
    /// Most rows in a chunk a source emits.
    pub batch_size: usize,
    /// The job's name.
    pub name: String,
    /// Checkpointing.
    pub checkpoints: CheckpointConfig,
    /// Restarts after failures, as set (see [`JobConfig::restart_strategy`]).
    pub restart: RestartOptions,
    /// Idle state retention of unbounded keyed state (`None`: kept for good).
    pub state_ttl: Option<std::time::Duration>,
    /// `table.exec.source.cdc-events-duplicate`: changelog sources with a primary key are
    /// deduplicated by it.
    pub cdc_events_duplicate: bool,
    raw: BTreeMap<String, String>,
}

impl Default for JobConfig {
    fn default() -> Self {
        JobConfig {
            parallelism: 1,
            max_parallelism: 128,
            batch_size: 4096,
            name: "eddy-job".to_string(),
            checkpoints: CheckpointConfig::default(),
            restart: RestartOptions::default(),
            state_ttl: None,
            cdc_events_duplicate: false,
            raw: BTreeMap::new(),
        }
    }
}

impl JobConfig {
    /// Applies one `SET 'key' = 'value'`.
    pub fn set(&mut self, key: &str, value: &str) -> Result<()> {
        match key {
            PARALLELISM => self.parallelism = parse_positive(key, value)?,
            MAX_PARALLELISM => {
                let max = parse_positive(key, value)?;
                if max > 32768 {
                    return Err(EddyError::Config(format!(
                        "'{key}' = '{value}': at most 32768"
                    )));
                }
                self.max_parallelism = max;
            }
            BATCH_SIZE => self.batch_size = parse_positive(key, value)?,
            PIPELINE_NAME => self.name = value.to_string(),
            STATE_TTL => {
                let ttl = parse_duration(key, value)?;
                self.state_ttl = (!ttl.is_zero()).then_some(ttl);
            }
            CDC_EVENTS_DUPLICATE => self.cdc_events_duplicate = parse_bool(key, value)?,
            "execution.checkpointing.interval" => {
                let interval = parse_duration(key, value)?;
                self.checkpoints.interval = (!interval.is_zero()).then_some(interval);
            }
            "execution.checkpointing.mode" => {
                self.checkpoints.mode = match value.trim().to_ascii_uppercase().as_str() {
                    "EXACTLY_ONCE" => CheckpointingMode::ExactlyOnce,
                    "AT_LEAST_ONCE" => CheckpointingMode::AtLeastOnce,
                    _ => {
                        return Err(EddyError::Config(format!(
                            "'{key}' = '{value}': expected EXACTLY_ONCE or AT_LEAST_ONCE"
                        )));
                    }
                }
            }
            "execution.checkpointing.timeout" => {
                self.checkpoints.timeout = parse_duration(key, value)?
            }
            "execution.checkpointing.min-pause" => {
                self.checkpoints.min_pause = parse_duration(key, value)?
            }
            "execution.checkpointing.tolerable-failed-checkpoints" => {
                self.checkpoints.tolerable_failures = parse_count(key, value)? as u32
            }
            "execution.checkpointing.num-retained" => {
                self.checkpoints.retained = parse_positive(key, value)?
            }
            "execution.checkpointing.unaligned" => {
                self.checkpoints.unaligned = parse_bool(key, value)?
            }
            "execution.checkpointing.incremental" | "state.backend.incremental" => {
                self.checkpoints.incremental = parse_bool(key, value)?
            }
            "execution.checkpointing.dir" | "state.checkpoints.dir" => {
                self.checkpoints.directory = Some(value.trim().to_string())
            }
            _ if self.restart.set(key, value)? => {}
            _ => {
                return Err(EddyError::Config(format!(
                    "unknown option '{key}'; valid options are: {}",
                    KNOWN_KEYS
                        .iter()
                        .chain(restart::KEYS)
                        .copied()
                        .collect::<Vec<_>>()
                        .join(", ")
                )));
            }
        }
        self.raw.insert(key.to_string(), value.to_string());
        Ok(())
    }

    /// The restart strategy in force: as set, or Flink's default for the job's
    /// checkpointing.
    pub fn restart_strategy(&self) -> RestartStrategy {
        self.restart.strategy(self.checkpoints.interval.is_some())
    }

    /// Checks the options fit together.
    pub fn validate(&self) -> Result<()> {
        self.restart.validate()?;
        if self.checkpoints.unaligned && self.checkpoints.mode == CheckpointingMode::AtLeastOnce {
            return Err(EddyError::Config(
                "unaligned checkpoints need execution.checkpointing.mode = EXACTLY_ONCE".into(),
            ));
        }
        if self.parallelism > self.max_parallelism {
            return Err(EddyError::Config(format!(
                "'{PARALLELISM}' ({}) exceeds '{MAX_PARALLELISM}' ({})",
                self.parallelism, self.max_parallelism
            )));
        }
        Ok(())
    }

    /// The options as they were set, for display.
    pub fn entries(&self) -> impl Iterator<Item = (&str, &str)> {
        self.raw.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }
}

fn parse_count(key: &str, value: &str) -> Result<usize> {
    value
        .trim()
        .parse::<usize>()
        .map_err(|_| EddyError::Config(format!("'{key}' = '{value}': expected a whole number")))
}

fn parse_bool(key: &str, value: &str) -> Result<bool> {
    match value.trim().to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(EddyError::Config(format!(
            "'{key}' = '{value}': expected true or false"
        ))),
    }
}

fn parse_positive(key: &str, value: &str) -> Result<usize> {
    match value.trim().parse::<usize>() {
        Ok(v) if v > 0 => Ok(v),
        _ => Err(EddyError::Config(format!(
            "'{key}' = '{value}': expected a whole number greater than 0"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_parses_and_validates() {
        let mut config = JobConfig::default();
        config.set(PARALLELISM, "4").unwrap();
        assert_eq!(config.parallelism, 4);
        assert!(config.set(PARALLELISM, "zero").is_err());
        let err = config.set("no.such.key", "1").unwrap_err().to_string();
        assert!(err.contains("parallelism.default"), "{err}");
        config.set(MAX_PARALLELISM, "2").unwrap();
        assert!(config.validate().is_err());
    }
}
