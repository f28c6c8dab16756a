//! A TaskManager whose wall clock steps (as an NTP step or an operator's `date -s` does),
//! back an hour and then forward two, while it runs half of an exactly-once event-time
//! job: libfaketime (Debian's `faketime`) is preloaded into that TaskManager alone, its
//! offset read from a file the test rewrites; the monotonic clock is left alone, as a real
//! step leaves it. The job must end exact. Fails loudly without libfaketime.

use std::path::PathBuf;
use std::time::Duration;

use crate::processes::Cluster;
use crate::recovery::{assert_windows_exact, windows_into_files};
use crate::support::exclusive;

/// libfaketime's thread-safe preload library, wherever the distribution put it.
fn libfaketime() -> PathBuf {
    let found = std::fs::read_dir("/usr/lib")
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| entry.path().join("faketime/libfaketimeMT.so.1"))
        .chain([PathBuf::from("/usr/lib/faketime/libfaketimeMT.so.1")])
        .find(|path| path.exists());
    found.expect("libfaketime is missing: apt-get install faketime (.ci/run installs it)")
}

/// When the newest line of a JSON log was written, by its writer's clock, in seconds
/// since the epoch.
fn last_logged_at(log: &std::path::Path) -> Option<i64> {
    let text = std::fs::read_to_string(log).ok()?;
    text.lines().rev().find_map(|line| {
        let value: serde_json::Value = serde_json::from_str(line).ok()?;
        epoch_seconds(value["timestamp"].as_str()?)
    })
}

/// `YYYY-MM-DDTHH:MM:SS...` (UTC) in seconds since the epoch.
fn epoch_seconds(timestamp: &str) -> Option<i64> {
    let field = |range: std::ops::Range<usize>| timestamp.get(range)?.parse::<i64>().ok();
    let (year, month, day) = (field(0..4)?, field(5..7)?, field(8..10)?);
    let (hour, minute, second) = (field(11..13)?, field(14..16)?, field(17..19)?);
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let year_of_era = y - era * 400;
    let day_of_year = (153 * ((month + 9) % 12) + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    let days = era * 146_097 + day_of_era - 719_468;
    Some(days * 86_400 + hour * 3600 + minute * 60 + second)
}

#[test]
fn a_taskmanager_clock_stepping_back_and_forth_changes_nothing() {
    let _heavy = exclusive();
    let mut cluster = Cluster::start("clock-step", 1, 2);
    let offset = cluster.scratch.write("faketime", "+0");
    let logs = cluster.scratch.path().join("stepped-logs");
    let preload = libfaketime().display().to_string();
    let (offset_file, log_dir) = (offset.display().to_string(), logs.display().to_string());
    cluster.add_taskmanager_with(
        2,
        &[
            ("LD_PRELOAD", &preload),
            ("FAKETIME_TIMESTAMP_FILE", &offset_file),
            ("FAKETIME_NO_CACHE", "1"),
            ("FAKETIME_DONT_FAKE_MONOTONIC", "1"),
            ("EDDY_TEST_STDERR_DIR", &log_dir),
            ("EDDY_LOG", "warn,eddy_taskmanager::grpc=debug"),
            ("EDDY_LOG_FORMAT", "json"),
        ],
    );
    let output = cluster.scratch.path().join("windows");
    let script = format!(
        "SET 'execution.checkpointing.interval' = '500ms';
         {}",
        windows_into_files("", &output, 400_000, 20_000)
    );
    let job = cluster.submit(&script, 4);
    let status = cluster.wait_for(&job, "RUNNING", Duration::from_secs(60));
    let placed: Vec<&str> = status["vertices"][0]["subtasks"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["taskmanager"].as_str())
        .collect();
    assert!(
        placed.contains(&"tm-2"),
        "the stepped TaskManager runs nothing: {status}"
    );
    std::thread::sleep(Duration::from_secs(3));
    std::fs::write(&offset, "-1h").unwrap();
    eprintln!("clock stepped back an hour");
    std::thread::sleep(Duration::from_secs(4));
    std::fs::write(&offset, "+1h").unwrap();
    eprintln!("clock stepped forward two hours");
    std::thread::sleep(Duration::from_secs(2));
    let log = std::fs::read_dir(&logs)
        .unwrap()
        .flatten()
        .next()
        .unwrap()
        .path();
    let stepped = last_logged_at(&log).expect("the stepped TaskManager logged");
    let ahead = stepped - now_seconds();
    assert!(
        (3500..=3700).contains(&ahead),
        "the TaskManager's clock is {ahead} s ahead, not an hour"
    );
    cluster.wait_for(&job, "FINISHED", Duration::from_secs(180));
    assert_windows_exact(&cluster.scratch, &output);
}

/// Seconds since the epoch by the test's own clock.
fn now_seconds() -> i64 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    since.unwrap().as_secs() as i64
}
