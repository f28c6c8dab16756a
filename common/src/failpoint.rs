//! Failpoints for fault-injection tests: `EDDY_FAILPOINTS=name=value[,name=value…]` makes
//! the process abort, as a SIGKILL would end it, when it first reaches the named point with
//! that value or a larger one (e.g. `jobmanager.before-notify=3`: right after the metadata of
//! checkpoint 3 or a later one is written, before any task learns the checkpoint completed).
//! Unset, a failpoint costs one lookup. Only builds with the `failpoints` feature (test
//! builds) have them: elsewhere [`crash_if`] does nothing, whatever the environment says.

#[cfg(feature = "failpoints")]
use std::sync::OnceLock;

/// The configured failpoints, read once.
#[cfg(feature = "failpoints")]
fn configured() -> &'static [(String, u64)] {
    static FAILPOINTS: OnceLock<Vec<(String, u64)>> = OnceLock::new();
    FAILPOINTS.get_or_init(|| parse(&std::env::var("EDDY_FAILPOINTS").unwrap_or_default()))
}

#[cfg(any(test, feature = "failpoints"))]
fn parse(text: &str) -> Vec<(String, u64)> {
    text.split(',')
        .filter_map(|item| {
            let (name, value) = item.split_once('=')?;
            Some((name.trim().to_string(), value.trim().parse().ok()?))
        })
        .collect()
}

/// Aborts the process if failpoint `name` is set to `value` or less.
#[cfg(feature = "failpoints")]
pub fn crash_if(name: &str, value: u64) {
    if configured().iter().any(|(n, v)| n == name && *v <= value) {
        tracing::error!(
            failpoint = name,
            value,
            "failpoint reached: aborting the process"
        );
        std::process::abort();
    }
}

/// Failpoints are not built in: nothing happens.
#[cfg(not(feature = "failpoints"))]
#[inline(always)]
pub fn crash_if(name: &str, value: u64) {
    let _ = (name, value);
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn parses_pairs_and_skips_garbage() {
        assert_eq!(
            parse("jobmanager.before-notify=3, x=y,other=10"),
            vec![
                ("jobmanager.before-notify".to_string(), 3),
                ("other".to_string(), 10)
            ]
        );
        assert!(parse("").is_empty());
    }
}
