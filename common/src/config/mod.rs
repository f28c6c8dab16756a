//! Job options, set in a script with `SET 'key' = 'value'` or from the command line.

use std::collections::BTreeMap;

pub mod checkpointing;
pub mod options;
pub mod python;
pub mod restart;
pub mod state;

use crate::{EddyError, Result};
use checkpointing::{CheckpointConfig, CheckpointingMode};
use options::{JOB_OPTIONS, job_option};
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

/// The most key groups a job can have (`pipeline.max-parallelism`).
pub const MAX_KEY_GROUPS: usize = 32768;

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
    /// Where keyed state lives.
    pub state_backend: state::StateBackendConfig,
    /// How Python user-defined functions run.
    pub python: python::PythonConfig,
    raw: BTreeMap<String, String>,
}

impl Default for JobConfig {
    /// Every option at its declared default ([`JOB_OPTIONS`]).
    fn default() -> Self {
        let mut config = JobConfig::unset();
        for option in JOB_OPTIONS {
            if let Some(default) = option.default {
                // A default that does not parse fails `options::tests` at once.
                let _ = (option.apply)(&mut config, option.key, default);
            }
        }
        config
    }
}

impl JobConfig {
    /// Every field before the declared defaults are applied: what an option without a
    /// default means when unset (no checkpoint interval, no state TTL, ...).
    fn unset() -> Self {
        JobConfig {
            parallelism: 0,
            max_parallelism: 0,
            batch_size: 0,
            name: String::new(),
            checkpoints: CheckpointConfig::unset(),
            restart: RestartOptions::unset(),
            state_ttl: None,
            cdc_events_duplicate: false,
            state_backend: state::StateBackendConfig::unset(),
            python: python::PythonConfig::unset(),
            raw: BTreeMap::new(),
        }
    }

    /// Applies one `SET 'key' = 'value'`.
    pub fn set(&mut self, key: &str, value: &str) -> Result<()> {
        let Some(option) = job_option(key) else {
            let keys: Vec<&str> = JOB_OPTIONS.iter().map(|option| option.key).collect();
            return Err(EddyError::Config(format!(
                "unknown option '{key}'; valid options are: {}",
                keys.join(", ")
            )));
        };
        (option.apply)(self, key, value)?;
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
