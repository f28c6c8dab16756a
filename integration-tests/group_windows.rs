//! Flink's group windows (`GROUP BY TUMBLE(ts, ...)`, `HOP`, `SESSION`, with `*_START`,
//! `*_END`, `*_ROWTIME`) and session TVFs: every query of `group_windows/` over
//! `group_windows/clicks.csv` gives Apache Flink's rows (`NAME.flink`, written by
//! `bench/flink/query_answers.py`), at parallelism 1 and 4; what Eddy would answer
//! differently is refused.

use std::path::{Path, PathBuf};

use crate::flink_oracle::OracleDir;
use crate::support::{Scratch, eddy};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("integration-tests/group_windows")
}

#[test]
fn group_windows_give_flinks_rows() {
    OracleDir::new("group_windows").check_all(&[
        "tumble",
        "hop",
        "session",
        "rowtime",
        "session_tvf",
    ]);
}

/// The same windows with their keys in LSM stores with the least memory they take
/// (session windows too) give the same rows.
#[test]
fn group_windows_on_the_lsm_backend_give_flinks_rows() {
    OracleDir::new("group_windows")
        .on_the_lsm_backend()
        .check_all(&["tumble", "hop", "session", "rowtime", "session_tvf"]);
}

#[test]
fn a_group_window_over_a_join_is_refused_with_the_way_out() {
    let scratch = Scratch::new("group-window-join");
    let file = scratch.write(
        "job.sql",
        "CREATE TABLE a (ts TIMESTAMP(3), k BIGINT, WATERMARK FOR ts AS ts)
           WITH ('connector' = 'datagen', 'number-of-rows' = '1');
         CREATE TABLE b (k BIGINT) WITH ('connector' = 'datagen', 'number-of-rows' = '1');
         CREATE TABLE o (n BIGINT) WITH ('connector' = 'print');
         INSERT INTO o SELECT COUNT(*) FROM a JOIN b ON a.k = b.k
           GROUP BY TUMBLE(a.ts, INTERVAL '1' SECOND);",
    );
    let output = eddy().arg("run").arg(&file).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(
        stderr.contains("unsupported: the group window TUMBLE(...) over a join"),
        "{stderr}"
    );
}

#[test]
fn a_session_tvf_partitioned_otherwise_than_grouped_is_refused() {
    // Flink computes these sessions over all users' clicks together; Eddy's window
    // aggregate would compute them per user.
    let scratch = Scratch::new("session-tvf");
    let file = scratch.write(
        "job.sql",
        &format!(
            "CREATE TABLE clicks (ts TIMESTAMP(3), user_id BIGINT, amount BIGINT,
               WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
               WITH ('connector' = 'filesystem', 'path' = '{}', 'format' = 'csv');
             CREATE TABLE o (u BIGINT, n BIGINT) WITH ('connector' = 'print');
             INSERT INTO o SELECT user_id, COUNT(*)
               FROM TABLE(SESSION(TABLE clicks, DESCRIPTOR(ts), INTERVAL '3' SECOND))
               GROUP BY window_start, window_end, user_id;",
            dir().join("clicks.csv").display()
        ),
    );
    let output = eddy().arg("run").arg(&file).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(
        stderr.contains(
            "unsupported: a SESSION window whose PARTITION BY () is not the GROUP BY keys"
        ),
        "{stderr}"
    );
}
