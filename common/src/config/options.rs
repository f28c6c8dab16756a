//! Every job option, declared once: its key (as Flink names it), the keys it is also known
//! by, its default, what it does and how a value is applied. Parsing, the defaults of
//! [`JobConfig`], the unknown-key error and the README's table all come from [`JOB_OPTIONS`].

use std::time::Duration;

use super::checkpointing::{CheckpointingMode, parse_duration};
use super::python::parse_files;
use super::restart::{parse_kind, parse_number, parse_positive_duration, parse_restarts};
use super::state::{parse_kind as parse_backend, parse_memory_size};
use super::{JobConfig, MAX_KEY_GROUPS};
use crate::{EddyError, Result};

/// One job option.
pub struct JobOption {
    /// The key, as Flink names it.
    pub key: &'static str,
    /// Other keys that set the same option.
    pub aliases: &'static [&'static str],
    /// The value a job has without a `SET`, written as a `SET` would write it; `None` when
    /// an unset option means something no value says (the doc tells what).
    pub default: Option<&'static str>,
    /// What the option does, one sentence for people.
    pub doc: &'static str,
    /// Applies a value (the key is passed for error messages).
    pub(super) apply: fn(&mut JobConfig, &str, &str) -> Result<()>,
}

impl JobOption {
    /// Whether `key` names this option.
    pub fn is_named(&self, key: &str) -> bool {
        self.key == key || self.aliases.contains(&key)
    }
}

/// The option `key` names, if any.
pub fn job_option(key: &str) -> Option<&'static JobOption> {
    JOB_OPTIONS.iter().find(|option| option.is_named(key))
}

/// The job options as a Markdown table (key, default, meaning), for the README.
pub fn markdown_table() -> String {
    let mut table = String::from("| option | default | meaning |\n|---|---|---|\n");
    for option in JOB_OPTIONS {
        let mut key = format!("`{}`", option.key);
        for alias in option.aliases {
            key.push_str(&format!(" (or `{alias}`)"));
        }
        let default = option
            .default
            .map_or("(unset)".to_string(), |d| format!("`{d}`"));
        table.push_str(&format!("| {key} | {default} | {} |\n", option.doc));
    }
    table
}

/// Every job option.
pub const JOB_OPTIONS: &[JobOption] = &[
    JobOption {
        key: super::PARALLELISM,
        aliases: &[],
        default: Some("1"),
        doc: "parallelism of every operator that has no reason to run with less",
        apply: |c, k, v| set(&mut c.parallelism, parse_positive(k, v)),
    },
    JobOption {
        key: super::MAX_PARALLELISM,
        aliases: &[],
        default: Some("128"),
        doc: "key groups keyed state is split into: the most a keyed operator can ever be scaled to (at most 32768)",
        apply: |c, k, v| match parse_positive(k, v)? {
            max if max > MAX_KEY_GROUPS => Err(EddyError::Config(format!(
                "'{k}' = '{v}': at most {MAX_KEY_GROUPS}"
            ))),
            max => set(&mut c.max_parallelism, Ok(max)),
        },
    },
    JobOption {
        key: super::BATCH_SIZE,
        aliases: &[],
        default: Some("4096"),
        doc: "most rows a source puts into one chunk, and so the most rows an aggregate takes in before it emits its changes",
        apply: |c, k, v| set(&mut c.batch_size, parse_positive(k, v)),
    },
    JobOption {
        key: super::PIPELINE_NAME,
        aliases: &[],
        default: Some("eddy-job"),
        doc: "the job's name, shown in logs and listings",
        apply: |c, _, v| set(&mut c.name, Ok(v.to_string())),
    },
    JobOption {
        key: super::STATE_TTL,
        aliases: &[],
        default: Some("0"),
        doc: "how long keyed state of unbounded GROUP BYs, regular joins, Top-Ns and deduplications lives after its last write, by the wall clock (0: for good)",
        apply: |c, k, v| set(&mut c.state_ttl, nonzero(parse_duration(k, v))),
    },
    JobOption {
        key: super::CDC_EVENTS_DUPLICATE,
        aliases: &[],
        default: Some("false"),
        doc: "changelog sources may deliver a change more than once (Debezium's at-least-once delivery): each is then normalized on its primary key",
        apply: |c, k, v| set(&mut c.cdc_events_duplicate, parse_bool(k, v)),
    },
    JobOption {
        key: "state.backend.type",
        aliases: &[],
        default: Some("hashmap"),
        doc: "`hashmap`: keyed state in memory; `rocksdb`: keyed state in Eddy's LSM store on local disk (memory a cache of it), checkpointed by its immutable files, each stored once: unbounded GROUP BYs, regular joins, Top-N, deduplication, changelog normalization, window aggregates (session windows too), window Top-N, window joins, interval and temporal joins, and OVER aggregates (every keyed operator)",
        apply: |c, k, v| set(&mut c.state_backend.kind, parse_backend(k, v)),
    },
    JobOption {
        key: "state.backend.rocksdb.localdir",
        aliases: &[],
        default: None,
        doc: "`rocksdb`: the directory LSM stores write under (unset: the system's temporary directory)",
        apply: |c, _, v| set(&mut c.state_backend.local_dir, Ok(Some(v.trim().into()))),
    },
    JobOption {
        key: "state.backend.rocksdb.memory.fixed-per-slot",
        aliases: &[],
        default: Some("256mb"),
        doc: "`rocksdb`: memory the LSM stores of one subtask share (write buffers, block caches, hot keys)",
        apply: |c, k, v| {
            set(
                &mut c.state_backend.memory_per_slot,
                parse_memory_size(k, v),
            )
        },
    },
    JobOption {
        key: "python.executable",
        aliases: &[],
        default: Some("python3"),
        doc: "the Python interpreter the workers of Python functions run (it needs `pyarrow`; `pandas` for pandas functions)",
        apply: |c, _, v| set(&mut c.python.executable, Ok(v.trim().into())),
    },
    JobOption {
        key: "python.files",
        aliases: &[],
        default: None,
        doc: "files (`.py`), directories and archives (`.zip`, `.whl`) the modules of Python functions are imported from, separated by commas; paths as the TaskManagers see them",
        apply: |c, _, v| set(&mut c.python.files, Ok(parse_files(v))),
    },
    JobOption {
        key: "python.worker.timeout",
        aliases: &[],
        default: Some("60 s"),
        doc: "how long one call of a Python function (one chunk of rows) may take: a worker that has not answered by then is stopped and the task fails (and restarts)",
        apply: |c, k, v| set(&mut c.python.timeout, parse_positive_duration(k, v)),
    },
    JobOption {
        key: "python.worker.memory",
        aliases: &[],
        default: None,
        doc: "the most memory (address space) one Python worker may map, e.g. `2gb`: past it an allocation raises `MemoryError`, which fails the task (unset: no limit)",
        apply: |c, k, v| {
            set(
                &mut c.python.memory_limit,
                parse_memory_size(k, v).map(Some),
            )
        },
    },
    JobOption {
        key: "execution.checkpointing.interval",
        aliases: &[],
        default: None,
        doc: "time between checkpoints; unset or 0: no checkpoints (at most once)",
        apply: |c, k, v| set(&mut c.checkpoints.interval, nonzero(parse_duration(k, v))),
    },
    JobOption {
        key: "execution.checkpointing.mode",
        aliases: &[],
        default: Some("EXACTLY_ONCE"),
        doc: "`EXACTLY_ONCE` (aligned barriers) or `AT_LEAST_ONCE` (no alignment: after a recovery some records count twice)",
        apply: |c, k, v| set(&mut c.checkpoints.mode, parse_mode(k, v)),
    },
    JobOption {
        key: "execution.checkpointing.timeout",
        aliases: &[],
        default: Some("10min"),
        doc: "a checkpoint not complete after this is aborted",
        apply: |c, k, v| set(&mut c.checkpoints.timeout, parse_duration(k, v)),
    },
    JobOption {
        key: "execution.checkpointing.min-pause",
        aliases: &[],
        default: Some("0"),
        doc: "least time between the end of one checkpoint and the start of the next",
        apply: |c, k, v| set(&mut c.checkpoints.min_pause, parse_duration(k, v)),
    },
    JobOption {
        key: "execution.checkpointing.tolerable-failed-checkpoints",
        aliases: &[],
        default: Some("0"),
        doc: "consecutive failed checkpoints tolerated before the job fails",
        apply: |c, k, v| {
            let count = parse_count(k, v)?;
            let count = u32::try_from(count)
                .map_err(|_| EddyError::Config(format!("'{k}' = '{v}': at most {}", u32::MAX)));
            set(&mut c.checkpoints.tolerable_failures, count)
        },
    },
    JobOption {
        key: "execution.checkpointing.num-retained",
        aliases: &[],
        default: Some("3"),
        doc: "completed checkpoints kept; older ones are deleted",
        apply: |c, k, v| set(&mut c.checkpoints.retained, parse_positive(k, v)),
    },
    JobOption {
        key: "execution.checkpointing.unaligned",
        aliases: &[],
        default: Some("false"),
        doc: "unaligned checkpoints: barriers overtake buffered records (exactly-once only)",
        apply: |c, k, v| set(&mut c.checkpoints.unaligned, parse_bool(k, v)),
    },
    JobOption {
        key: "execution.checkpointing.incremental",
        aliases: &["state.backend.incremental"],
        default: Some("true"),
        doc: "snapshots hold only what changed since the previous completed checkpoint where the operator can (GROUP BY, joins)",
        apply: |c, k, v| set(&mut c.checkpoints.incremental, parse_bool(k, v)),
    },
    JobOption {
        key: "execution.checkpointing.dir",
        aliases: &["state.checkpoints.dir"],
        default: None,
        doc: "where checkpoints go (a path, `file:///…` or `s3://bucket/prefix`); unset: the JobManager's `--checkpoint-dir`",
        apply: |c, _, v| set(&mut c.checkpoints.directory, Ok(Some(v.trim().to_string()))),
    },
    JobOption {
        key: super::restart::TYPE,
        aliases: &[],
        default: None,
        doc: "`none` (or `off`, `disable`), `fixed-delay`, `failure-rate` or `exponential-delay`; unset: `exponential-delay` with checkpoints, `none` without",
        apply: |c, k, v| set(&mut c.restart.kind, parse_kind(k, v).map(Some)),
    },
    JobOption {
        key: "restart-strategy.fixed-delay.attempts",
        aliases: &[],
        default: Some("1"),
        doc: "`fixed-delay`: restarts before the job fails for good",
        apply: |c, k, v| set(&mut c.restart.fixed_delay.attempts, parse_restarts(k, v, 0)),
    },
    JobOption {
        key: "restart-strategy.fixed-delay.delay",
        aliases: &[],
        default: Some("1s"),
        doc: "`fixed-delay`: delay before each restart",
        apply: |c, k, v| set(&mut c.restart.fixed_delay.delay, parse_duration(k, v)),
    },
    JobOption {
        key: "restart-strategy.failure-rate.max-failures-per-interval",
        aliases: &[],
        default: Some("1"),
        doc: "`failure-rate`: failures tolerated within the interval",
        apply: |c, k, v| {
            set(
                &mut c.restart.failure_rate.max_failures,
                parse_restarts(k, v, 1),
            )
        },
    },
    JobOption {
        key: "restart-strategy.failure-rate.failure-rate-interval",
        aliases: &[],
        default: Some("1min"),
        doc: "`failure-rate`: the interval",
        apply: |c, k, v| {
            set(
                &mut c.restart.failure_rate.interval,
                parse_positive_duration(k, v),
            )
        },
    },
    JobOption {
        key: "restart-strategy.failure-rate.delay",
        aliases: &[],
        default: Some("1s"),
        doc: "`failure-rate`: delay before each restart",
        apply: |c, k, v| set(&mut c.restart.failure_rate.delay, parse_duration(k, v)),
    },
    JobOption {
        key: "restart-strategy.exponential-delay.initial-backoff",
        aliases: &[],
        default: Some("1s"),
        doc: "`exponential-delay`: the first delay",
        apply: |c, k, v| {
            let backoff = parse_positive_duration(k, v);
            set(&mut c.restart.exponential_delay.initial_backoff, backoff)
        },
    },
    JobOption {
        key: "restart-strategy.exponential-delay.max-backoff",
        aliases: &[],
        default: Some("1min"),
        doc: "`exponential-delay`: the largest delay",
        apply: |c, k, v| {
            let backoff = parse_positive_duration(k, v);
            set(&mut c.restart.exponential_delay.max_backoff, backoff)
        },
    },
    JobOption {
        key: "restart-strategy.exponential-delay.backoff-multiplier",
        aliases: &[],
        default: Some("1.5"),
        doc: "`exponential-delay`: factor between consecutive delays (above 1)",
        apply: |c, k, v| {
            let multiplier = parse_number(k, v, |m| m > 1.0, "greater than 1");
            set(&mut c.restart.exponential_delay.multiplier, multiplier)
        },
    },
    JobOption {
        key: "restart-strategy.exponential-delay.reset-backoff-threshold",
        aliases: &[],
        default: Some("1h"),
        doc: "`exponential-delay`: running this long without failing resets the delay and the count",
        apply: |c, k, v| {
            let threshold = parse_positive_duration(k, v);
            set(&mut c.restart.exponential_delay.reset_threshold, threshold)
        },
    },
    JobOption {
        key: "restart-strategy.exponential-delay.jitter-factor",
        aliases: &[],
        default: Some("0.1"),
        doc: "`exponential-delay`: each delay moves by up to this share of itself at random (0 to 1)",
        apply: |c, k, v| {
            let jitter = parse_number(k, v, |j| (0.0..=1.0).contains(&j), "from 0 to 1");
            set(&mut c.restart.exponential_delay.jitter, jitter)
        },
    },
    JobOption {
        key: "restart-strategy.exponential-delay.attempts-before-reset-backoff",
        aliases: &[],
        default: Some("4294967295"),
        doc: "`exponential-delay`: restarts between resets before the job fails for good (the default: unlimited)",
        apply: |c, k, v| {
            let attempts = parse_restarts(k, v, 1);
            set(&mut c.restart.exponential_delay.attempts, attempts)
        },
    },
];

/// Stores a parsed value.
fn set<T>(field: &mut T, value: Result<T>) -> Result<()> {
    *field = value?;
    Ok(())
}

/// A duration where zero means "none".
fn nonzero(duration: Result<Duration>) -> Result<Option<Duration>> {
    Ok(Some(duration?).filter(|d| !d.is_zero()))
}

fn parse_mode(key: &str, value: &str) -> Result<CheckpointingMode> {
    match value.trim().to_ascii_uppercase().as_str() {
        "EXACTLY_ONCE" => Ok(CheckpointingMode::ExactlyOnce),
        "AT_LEAST_ONCE" => Ok(CheckpointingMode::AtLeastOnce),
        _ => Err(EddyError::Config(format!(
            "'{key}' = '{value}': expected EXACTLY_ONCE or AT_LEAST_ONCE"
        ))),
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
    fn every_declared_default_is_a_valid_value_of_its_option() {
        for option in JOB_OPTIONS {
            if let Some(default) = option.default {
                let mut config = JobConfig::default();
                (option.apply)(&mut config, option.key, default)
                    .unwrap_or_else(|e| panic!("{}: {e}", option.key));
                assert_eq!(config, JobConfig::default(), "{} = {default}", option.key);
            }
        }
    }

    #[test]
    fn keys_are_declared_once() {
        let mut keys: Vec<&str> = JOB_OPTIONS
            .iter()
            .flat_map(|o| std::iter::once(o.key).chain(o.aliases.iter().copied()))
            .collect();
        let declared = keys.len();
        keys.sort_unstable();
        keys.dedup();
        assert_eq!(keys.len(), declared);
    }
}
