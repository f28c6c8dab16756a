//! Property tests of hostile input, shared by every crate's tests (feature `fuzzing`):
//! a bounded number of cases in CI (`PROPTEST_CASES`, 256 by default), any number on
//! demand, each run's seed printed so that a failure can be replayed exactly.

use proptest::test_runner::{Config, RngSeed};

/// The configuration of a property test: the seed of `PROPTEST_RNG_SEED`, or a fresh one,
/// printed with the test's name; no regression files (a crash found becomes a named
/// regression test beside the property).
pub fn config(test: &str) -> Config {
    let seed = std::env::var("PROPTEST_RNG_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64);
            nanos ^ u64::from(std::process::id()).rotate_left(32)
        });
    let config = Config {
        rng_seed: RngSeed::Fixed(seed),
        failure_persistence: None,
        ..Config::default()
    };
    eprintln!(
        "{test}: {} cases, seed {seed} (replay: PROPTEST_RNG_SEED={seed})",
        config.cases
    );
    config
}
