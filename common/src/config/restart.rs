//! `restart-strategy.*`: whether, and after what delay, a failed job restarts from its
//! latest checkpoint — Flink's restart strategies with Flink's option names, defaults and
//! counting.
//!
//! Without `restart-strategy.type`, a checkpointing job restarts with `exponential-delay`
//! (unlimited attempts; the backoff and the count reset once the job ran
//! `reset-backoff-threshold` without failing) and a job without checkpoints does not restart,
//! as in Flink 2.

use std::collections::VecDeque;
use std::fmt;
use std::time::{Duration, Instant};

use super::checkpointing::parse_duration;
use crate::{EddyError, Result};

/// `restart-strategy.type`.
pub const TYPE: &str = "restart-strategy.type";

/// `restart-strategy.type = fixed-delay`: a number of restarts, a fixed delay apart.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FixedDelay {
    /// Restarts before the job fails for good (`attempts`, default 1).
    pub attempts: u32,
    /// Delay before each restart (`delay`, default 1 s).
    pub delay: Duration,
}

/// `restart-strategy.type = failure-rate`: restarts until more than a number of failures
/// fall within an interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FailureRate {
    /// Failures tolerated within the interval (`max-failures-per-interval`, default 1).
    pub max_failures: u32,
    /// The interval (`failure-rate-interval`, default 1 min).
    pub interval: Duration,
    /// Delay before each restart (`delay`, default 1 s).
    pub delay: Duration,
}

/// `restart-strategy.type = exponential-delay`: a delay growing by a factor at each
/// failure, back to its start once the job ran long enough without failing.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ExponentialDelay {
    /// The first delay (`initial-backoff`, default 1 s).
    pub initial_backoff: Duration,
    /// The largest delay (`max-backoff`, default 1 min).
    pub max_backoff: Duration,
    /// Factor between consecutive delays (`backoff-multiplier`, default 1.5).
    pub multiplier: f64,
    /// Running this long without failing resets the delay and the count
    /// (`reset-backoff-threshold`, default 1 h).
    pub reset_threshold: Duration,
    /// Each delay moves by up to this share of itself at random (`jitter-factor`, 0.1).
    pub jitter: f64,
    /// Restarts between resets before the job fails for good
    /// (`attempts-before-reset-backoff`, default unlimited).
    pub attempts: u32,
}

/// The restart strategy in force for a job.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RestartStrategy {
    /// Never restart (`none`, `off`, `disable`).
    None,
    /// `fixed-delay`.
    FixedDelay(FixedDelay),
    /// `failure-rate`.
    FailureRate(FailureRate),
    /// `exponential-delay`.
    ExponentialDelay(ExponentialDelay),
}

/// Which strategy `restart-strategy.type` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    None,
    FixedDelay,
    FailureRate,
    ExponentialDelay,
}

/// The restart options as set; [`RestartOptions::strategy`] picks the strategy in force.
#[derive(Debug, Clone, PartialEq)]
pub struct RestartOptions {
    pub(super) kind: Option<Kind>,
    pub(super) fixed_delay: FixedDelay,
    pub(super) failure_rate: FailureRate,
    pub(super) exponential_delay: ExponentialDelay,
}

impl Default for RestartOptions {
    /// The declared defaults ([`super::options::JOB_OPTIONS`]).
    fn default() -> Self {
        super::JobConfig::default().restart
    }
}

impl RestartOptions {
    /// Every field before the declared defaults are applied.
    pub(super) fn unset() -> Self {
        let zero = Duration::ZERO;
        RestartOptions {
            kind: None,
            fixed_delay: FixedDelay {
                attempts: 0,
                delay: zero,
            },
            failure_rate: FailureRate {
                max_failures: 0,
                interval: zero,
                delay: zero,
            },
            exponential_delay: ExponentialDelay {
                initial_backoff: zero,
                max_backoff: zero,
                multiplier: 0.0,
                reset_threshold: zero,
                jitter: 0.0,
                attempts: 0,
            },
        }
    }

    /// Checks the options fit together.
    pub fn validate(&self) -> Result<()> {
        let exponential = &self.exponential_delay;
        if exponential.initial_backoff > exponential.max_backoff {
            return Err(EddyError::Config(format!(
                "'restart-strategy.exponential-delay.initial-backoff' ({:?}) exceeds \
                 'restart-strategy.exponential-delay.max-backoff' ({:?})",
                exponential.initial_backoff, exponential.max_backoff
            )));
        }
        Ok(())
    }

    /// The strategy in force: the one `restart-strategy.type` names, else
    /// `exponential-delay` for a job that checkpoints and `none` for one that does not.
    pub fn strategy(&self, checkpointing: bool) -> RestartStrategy {
        let kind = self.kind.unwrap_or(match checkpointing {
            true => Kind::ExponentialDelay,
            false => Kind::None,
        });
        match kind {
            Kind::None => RestartStrategy::None,
            Kind::FixedDelay => RestartStrategy::FixedDelay(self.fixed_delay),
            Kind::FailureRate => RestartStrategy::FailureRate(self.failure_rate),
            Kind::ExponentialDelay => RestartStrategy::ExponentialDelay(self.exponential_delay),
        }
    }
}

impl RestartStrategy {
    /// Its name, as `restart-strategy.type` takes it.
    pub fn name(&self) -> &'static str {
        match self {
            RestartStrategy::None => "none",
            RestartStrategy::FixedDelay(_) => "fixed-delay",
            RestartStrategy::FailureRate(_) => "failure-rate",
            RestartStrategy::ExponentialDelay(_) => "exponential-delay",
        }
    }
}

impl fmt::Display for RestartStrategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RestartStrategy::None => write!(f, "none"),
            RestartStrategy::FixedDelay(s) => {
                write!(
                    f,
                    "fixed-delay ({} attempts, {:?} apart)",
                    s.attempts, s.delay
                )
            }
            RestartStrategy::FailureRate(s) => write!(
                f,
                "failure-rate (at most {} failures in {:?}, {:?} apart)",
                s.max_failures, s.interval, s.delay
            ),
            RestartStrategy::ExponentialDelay(s) => {
                let attempts = match s.attempts {
                    u32::MAX => "unlimited".to_string(),
                    n => n.to_string(),
                };
                write!(
                    f,
                    "exponential-delay ({:?} to {:?} x{}, jitter {}, reset after {:?} \
                     without failure, {attempts} attempts between resets)",
                    s.initial_backoff, s.max_backoff, s.multiplier, s.jitter, s.reset_threshold
                )
            }
        }
    }
}

/// What a restart strategy decides about a failure.
#[derive(Debug, Clone, PartialEq)]
pub enum RestartDecision {
    /// Restart after `delay`.
    Restart {
        /// How long to wait first.
        delay: Duration,
    },
    /// Fail the job for good.
    GiveUp {
        /// Why, naming the strategy.
        reason: String,
    },
}

/// A job's restart strategy with what it remembers of the job's failures (Flink's
/// `RestartBackoffTimeStrategy`): the restarts counted since the last reset, when the
/// next restart is due, and the recent failures.
#[derive(Debug, Clone)]
pub struct RestartTracker {
    strategy: RestartStrategy,
    /// Restarts counted against the budget (since the last reset, for exponential-delay).
    attempts: u32,
    /// When the restart scheduled last is due (exponential-delay).
    next_restart: Option<Instant>,
    /// The recent failures (failure-rate).
    failures: VecDeque<Instant>,
    /// How often the backoff and the count went back to their start.
    resets: u32,
}

impl RestartTracker {
    /// A tracker that has seen no failure.
    pub fn new(strategy: RestartStrategy) -> Self {
        RestartTracker {
            strategy,
            attempts: 0,
            next_restart: None,
            failures: VecDeque::new(),
            resets: 0,
        }
    }

    /// The strategy it follows.
    pub fn strategy(&self) -> &RestartStrategy {
        &self.strategy
    }

    /// Restarts counted against the strategy's budget: since the last reset
    /// (exponential-delay), in all (fixed-delay), or within the interval (failure-rate).
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// How often the backoff and the count went back to their start.
    pub fn resets(&self) -> u32 {
        self.resets
    }

    /// A failure at `now`: restart after a delay, or give up. `random` is uniform in
    /// [0, 1) and places the jitter.
    pub fn on_failure(&mut self, now: Instant, random: f64) -> RestartDecision {
        match self.strategy {
            RestartStrategy::None => RestartDecision::GiveUp {
                reason: "restart-strategy.type is none".into(),
            },
            RestartStrategy::FixedDelay(fixed) => {
                self.attempts = self.attempts.saturating_add(1);
                match self.attempts <= fixed.attempts {
                    true => RestartDecision::Restart { delay: fixed.delay },
                    false => RestartDecision::GiveUp {
                        reason: format!(
                            "the fixed-delay restart strategy allows {} restarts",
                            fixed.attempts
                        ),
                    },
                }
            }
            RestartStrategy::FailureRate(rate) => self.failure_rate(rate, now),
            RestartStrategy::ExponentialDelay(exponential) => {
                self.exponential_delay(exponential, now, random)
            }
        }
    }

    /// More than `max_failures` failures within `interval` end the job.
    fn failure_rate(&mut self, rate: FailureRate, now: Instant) -> RestartDecision {
        let limit = rate.max_failures as usize;
        if self.failures.len() > limit {
            self.failures.pop_front();
        }
        self.failures.push_back(now);
        let earliest = *self.failures.front().expect("a failure was just added");
        self.attempts = self
            .failures
            .iter()
            .filter(|&&at| now.duration_since(at) <= rate.interval)
            .count() as u32;
        if self.failures.len() > limit && now.duration_since(earliest) <= rate.interval {
            return RestartDecision::GiveUp {
                reason: format!(
                    "{} failures within {:?} exceed the {} allowed \
                     (restart-strategy.failure-rate.max-failures-per-interval)",
                    self.failures.len(),
                    rate.interval,
                    rate.max_failures
                ),
            };
        }
        RestartDecision::Restart { delay: rate.delay }
    }

    /// The delay grows with each restart since the last reset; a failure while a restart
    /// is still due counts with it; running `reset_threshold` past the last restart's due
    /// time resets delay and count.
    fn exponential_delay(
        &mut self,
        s: ExponentialDelay,
        now: Instant,
        random: f64,
    ) -> RestartDecision {
        if let Some(due) = self.next_restart {
            if now <= due {
                return RestartDecision::Restart { delay: due - now };
            }
            if now - due >= s.reset_threshold && self.attempts > 0 {
                self.attempts = 0;
                self.resets += 1;
            }
        }
        let exponent = i32::try_from(self.attempts).unwrap_or(i32::MAX);
        let base = s.initial_backoff.as_secs_f64() * s.multiplier.powi(exponent);
        let base = if base.is_finite() { base } else { f64::MAX };
        let jitter = base * s.jitter * (2.0 * random - 1.0);
        let seconds = (base + jitter)
            .min(s.max_backoff.as_secs_f64())
            .max(s.initial_backoff.as_secs_f64());
        let delay = Duration::try_from_secs_f64(seconds).unwrap_or(s.max_backoff);
        self.next_restart = Some(now + delay);
        self.attempts = self.attempts.saturating_add(1);
        if self.attempts > s.attempts {
            return RestartDecision::GiveUp {
                reason: format!(
                    "{} restarts without {:?} of running in between \
                     (restart-strategy.exponential-delay.attempts-before-reset-backoff)",
                    s.attempts, s.reset_threshold
                ),
            };
        }
        RestartDecision::Restart { delay }
    }
}

/// A number uniform in [0, 1) for jitter, from the process's hash keys and a counter (no
/// random number crate for one draw per restart).
pub fn jitter_draw() -> f64 {
    use std::hash::{BuildHasher, Hasher};
    use std::sync::atomic::{AtomicU64, Ordering};
    static DRAWS: AtomicU64 = AtomicU64::new(0);
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(DRAWS.fetch_add(1, Ordering::Relaxed));
    (hasher.finish() >> 11) as f64 / (1u64 << 53) as f64
}

pub(super) fn parse_kind(key: &str, value: &str) -> Result<Kind> {
    match value.trim().to_ascii_lowercase().as_str() {
        "none" | "off" | "disable" => Ok(Kind::None),
        "fixed-delay" | "fixeddelay" => Ok(Kind::FixedDelay),
        "failure-rate" | "failurerate" => Ok(Kind::FailureRate),
        "exponential-delay" | "exponentialdelay" => Ok(Kind::ExponentialDelay),
        _ => Err(EddyError::Config(format!(
            "'{key}' = '{value}': expected none, fixed-delay, failure-rate or exponential-delay"
        ))),
    }
}

pub(super) fn parse_restarts(key: &str, value: &str, least: u32) -> Result<u32> {
    match value.trim().parse::<u32>() {
        Ok(n) if n >= least => Ok(n),
        _ => Err(EddyError::Config(format!(
            "'{key}' = '{value}': expected a whole number of at least {least}"
        ))),
    }
}

pub(super) fn parse_positive_duration(key: &str, value: &str) -> Result<Duration> {
    match parse_duration(key, value)? {
        d if d >= Duration::from_millis(1) => Ok(d),
        _ => Err(EddyError::Config(format!(
            "'{key}' = '{value}': expected at least 1 ms"
        ))),
    }
}

pub(super) fn parse_number(
    key: &str,
    value: &str,
    valid: impl Fn(f64) -> bool,
    what: &str,
) -> Result<f64> {
    match value.trim().parse::<f64>() {
        Ok(n) if valid(n) => Ok(n),
        _ => Err(EddyError::Config(format!(
            "'{key}' = '{value}': expected a number {what}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl RestartOptions {
        /// Applies `key` = `value` if `key` is a restart option; `Ok(false)` if it is not.
        fn set(&mut self, key: &str, value: &str) -> Result<bool> {
            let option = super::super::options::job_option(key);
            let Some(option) = option.filter(|_| key.starts_with("restart-strategy.")) else {
                return Ok(false);
            };
            let mut config = super::super::JobConfig {
                restart: self.clone(),
                ..Default::default()
            };
            (option.apply)(&mut config, key, value)?;
            *self = config.restart;
            Ok(true)
        }
    }

    fn options(pairs: &[(&str, &str)]) -> RestartOptions {
        let mut options = RestartOptions::default();
        for (key, value) in pairs {
            assert!(
                options.set(key, value).unwrap(),
                "{key} is a restart option"
            );
        }
        options.validate().unwrap();
        options
    }

    fn secs(s: f64) -> Duration {
        Duration::from_secs_f64(s)
    }

    #[test]
    fn the_default_depends_on_checkpointing_as_in_flink() {
        let defaults = RestartOptions::default();
        assert_eq!(defaults.strategy(false), RestartStrategy::None);
        let RestartStrategy::ExponentialDelay(s) = defaults.strategy(true) else {
            panic!("a checkpointing job restarts with exponential-delay");
        };
        assert_eq!(s.initial_backoff, secs(1.0));
        assert_eq!(s.max_backoff, secs(60.0));
        assert_eq!(s.multiplier, 1.5);
        assert_eq!(s.reset_threshold, secs(3600.0));
        assert_eq!(s.jitter, 0.1);
        assert_eq!(s.attempts, u32::MAX);
        let fixed = options(&[(TYPE, "fixed-delay")]);
        assert_eq!(
            fixed.strategy(false),
            RestartStrategy::FixedDelay(FixedDelay {
                attempts: 1,
                delay: secs(1.0)
            })
        );
    }

    #[test]
    fn the_default_never_gives_up_and_saturates_at_the_largest_delay() {
        let mut tracker = RestartTracker::new(RestartOptions::default().strategy(true));
        let mut now = Instant::now();
        let mut delays = Vec::new();
        for _ in 0..10_000 {
            let RestartDecision::Restart { delay } = tracker.on_failure(now, 0.5) else {
                panic!("the default gives up after {} restarts", tracker.attempts());
            };
            delays.push(delay);
            now += delay + secs(2.0);
        }
        assert_eq!(
            &delays[..4],
            &[secs(1.0), secs(1.5), secs(2.25), secs(3.375)]
        );
        assert_eq!(*delays.last().unwrap(), secs(60.0));
        assert_eq!(tracker.attempts(), 10_000);
        assert_eq!(tracker.resets(), 0);
    }

    #[test]
    fn jitter_moves_a_delay_by_at_most_its_factor_within_the_bounds() {
        let strategy = RestartOptions::default().strategy(true);
        let now = Instant::now();
        for random in [0.0, 0.999_999, 0.5, 0.25] {
            let mut tracker = RestartTracker::new(strategy);
            tracker.on_failure(now, 0.5);
            tracker.on_failure(now + secs(10.0), 0.5);
            // The third delay is 2.25 s, moved by up to 10 %.
            let RestartDecision::Restart { delay } = tracker.on_failure(now + secs(20.0), random)
            else {
                panic!("restarts");
            };
            let moved = (delay.as_secs_f64() - 2.25) / 0.225;
            assert!((moved - (2.0 * random - 1.0)).abs() < 1e-6, "{delay:?}");
        }
        // Near the largest delay, jitter never takes it past it.
        let mut tracker = RestartTracker::new(strategy);
        let mut now = now;
        for _ in 0..30 {
            let RestartDecision::Restart { delay } = tracker.on_failure(now, 0.999) else {
                panic!("restarts");
            };
            assert!(delay <= secs(60.0) && delay >= secs(1.0), "{delay:?}");
            now += delay + secs(1.0);
        }
    }

    #[test]
    fn running_past_the_threshold_resets_backoff_and_count() {
        let strategy = options(&[
            (
                "restart-strategy.exponential-delay.attempts-before-reset-backoff",
                "3",
            ),
            (
                "restart-strategy.exponential-delay.reset-backoff-threshold",
                "10 min",
            ),
            ("restart-strategy.exponential-delay.jitter-factor", "0"),
            ("restart-strategy.exponential-delay.backoff-multiplier", "2"),
        ])
        .strategy(true);
        let mut tracker = RestartTracker::new(strategy);
        let start = Instant::now();
        let restart = |t: &mut RestartTracker, at: f64| t.on_failure(start + secs(at), 0.5);
        assert_eq!(
            restart(&mut tracker, 0.0),
            RestartDecision::Restart { delay: secs(1.0) }
        );
        assert_eq!(
            restart(&mut tracker, 60.0),
            RestartDecision::Restart { delay: secs(2.0) }
        );
        // A failure while a restart is still due is the same restart.
        assert_eq!(
            restart(&mut tracker, 61.0),
            RestartDecision::Restart { delay: secs(1.0) }
        );
        assert_eq!(tracker.attempts(), 2);
        assert_eq!(
            restart(&mut tracker, 120.0),
            RestartDecision::Restart { delay: secs(4.0) }
        );
        // 10 minutes after the last restart was due: back to the first delay and count 1.
        assert_eq!(
            restart(&mut tracker, 724.0),
            RestartDecision::Restart { delay: secs(1.0) }
        );
        assert_eq!((tracker.attempts(), tracker.resets()), (1, 1));
        restart(&mut tracker, 730.0);
        restart(&mut tracker, 740.0);
        let RestartDecision::GiveUp { reason } = restart(&mut tracker, 750.0) else {
            panic!("a fourth restart without a reset exceeds 3 attempts");
        };
        assert!(reason.contains("attempts-before-reset-backoff"), "{reason}");
    }

    #[test]
    fn fixed_delay_allows_its_attempts() {
        let strategy = options(&[
            (TYPE, "fixed-delay"),
            ("restart-strategy.fixed-delay.attempts", "3"),
            ("restart-strategy.fixed-delay.delay", "250ms"),
        ])
        .strategy(true);
        let mut tracker = RestartTracker::new(strategy);
        let now = Instant::now();
        for _ in 0..3 {
            assert_eq!(
                tracker.on_failure(now, 0.0),
                RestartDecision::Restart { delay: secs(0.25) }
            );
        }
        assert!(matches!(
            tracker.on_failure(now, 0.0),
            RestartDecision::GiveUp { .. }
        ));
        let none = options(&[(TYPE, "none")]).strategy(true);
        assert!(matches!(
            RestartTracker::new(none).on_failure(now, 0.0),
            RestartDecision::GiveUp { .. }
        ));
    }

    #[test]
    fn failure_rate_fails_when_and_only_when_the_rate_is_exceeded() {
        let strategy = options(&[
            (TYPE, "failure-rate"),
            (
                "restart-strategy.failure-rate.max-failures-per-interval",
                "3",
            ),
            ("restart-strategy.failure-rate.failure-rate-interval", "60s"),
            ("restart-strategy.failure-rate.delay", "2s"),
        ])
        .strategy(true);
        let start = Instant::now();
        let mut tracker = RestartTracker::new(strategy);
        // Three failures every 61 s, for long: never more than three in any 60 s.
        for minute in 0..100 {
            for at in [0.0, 20.0, 40.0] {
                let now = start + secs(minute as f64 * 61.0 + at);
                assert_eq!(
                    tracker.on_failure(now, 0.0),
                    RestartDecision::Restart { delay: secs(2.0) },
                    "minute {minute}, second {at}"
                );
            }
        }
        // A fourth within 60 s of the three before it.
        let mut tracker = RestartTracker::new(strategy);
        for at in [0.0, 10.0, 20.0] {
            assert!(matches!(
                tracker.on_failure(start + secs(at), 0.0),
                RestartDecision::Restart { .. }
            ));
        }
        let RestartDecision::GiveUp { reason } = tracker.on_failure(start + secs(59.0), 0.0) else {
            panic!("4 failures in 59 s exceed 3 a minute");
        };
        assert!(
            reason.contains("4 failures within 60s exceed the 3"),
            "{reason}"
        );
    }

    #[test]
    fn bad_values_are_errors_naming_the_option() {
        let bad = [
            (TYPE, "sometimes"),
            ("restart-strategy.fixed-delay.attempts", "-1"),
            (
                "restart-strategy.failure-rate.max-failures-per-interval",
                "0",
            ),
            ("restart-strategy.failure-rate.failure-rate-interval", "0s"),
            ("restart-strategy.exponential-delay.backoff-multiplier", "1"),
            ("restart-strategy.exponential-delay.jitter-factor", "1.5"),
            (
                "restart-strategy.exponential-delay.attempts-before-reset-backoff",
                "0",
            ),
            ("restart-strategy.exponential-delay.initial-backoff", "0ms"),
        ];
        for (key, value) in bad {
            let error = RestartOptions::default().set(key, value).unwrap_err();
            assert!(error.to_string().contains(key), "{error}");
        }
        let mut inverted = RestartOptions::default();
        inverted
            .set("restart-strategy.exponential-delay.initial-backoff", "2min")
            .unwrap();
        assert!(inverted.validate().is_err());
        assert!(
            !RestartOptions::default()
                .set("restart-strategy.other", "1")
                .unwrap()
        );
    }

    #[test]
    fn jitter_draws_are_uniform_enough() {
        let draws: Vec<f64> = (0..1000).map(|_| jitter_draw()).collect();
        assert!(draws.iter().all(|d| (0.0..1.0).contains(d)));
        let mean = draws.iter().sum::<f64>() / draws.len() as f64;
        assert!((0.4..0.6).contains(&mean), "{mean}");
    }
}
