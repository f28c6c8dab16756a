//! Filesystem tables `PARTITIONED BY`, against Apache Flink both ways:
//! - Flink read the partitioned table Eddy wrote with Nexmark q10 (`partitioned/data.sql`)
//!   and answered the queries of `partitioned/` (bench/flink/query_answers.py); Eddy reads
//!   it back to the same rows at parallelism 1 and 4.
//! - Flink wrote q10's sink as published (`q10_official.job.sql`: partitioned by day and
//!   minute, success files by partition time) and left `layout.flink`
//!   (bench/flink/partition_layout.py); Eddy, writing it exactly once at parallelism 4,
//!   leaves the same partition directories, rows and success files.

use std::path::Path;

use crate::flink_oracle::OracleDir;
use crate::support::{Scratch, run_ok};

#[test]
fn a_partitioned_table_eddy_wrote_reads_back_as_flink_reads_it() {
    OracleDir::with_queries("partitioned", "integration-tests/partitioned")
        .check_all(&["read_back", "per_minute"]);
}

#[test]
fn nexmark_q10_leaves_flinks_partition_layout() {
    let oracle = OracleDir::with_queries("partitioned", "integration-tests/partitioned");
    let data = oracle.data().display().to_string();
    let scratch = Scratch::new("q10-partitioned");
    let out = scratch.path().join("sink_q10");
    let script = format!(
        "SET 'execution.checkpointing.interval' = '100ms';\n{}\n{}",
        oracle.file("tables.sql").replace("$DATA", &data),
        oracle
            .file("q10_official.job.sql")
            .replace("$OUT", &out.display().to_string())
    );
    run_ok(&scratch, &script, 4);
    assert_eq!(layout(&out), oracle.file("layout.flink"));
}

/// `partition: N rows[, _SUCCESS]` for each directory holding files, as
/// bench/flink/partition_layout.py writes Flink's.
fn layout(table: &Path) -> String {
    let mut directories = Vec::new();
    collect_directories(table, &mut directories);
    directories.sort();
    let mut text = String::new();
    for directory in directories {
        let files: Vec<_> = std::fs::read_dir(&directory)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.is_file())
            .collect();
        if files.is_empty() {
            continue;
        }
        let name = |p: &Path| p.file_name().unwrap().to_string_lossy().into_owned();
        let rows: usize = files
            .iter()
            .filter(|f| !name(f).starts_with(['.', '_']))
            .map(|f| std::fs::read_to_string(f).unwrap().lines().count())
            .sum();
        let success = files.iter().any(|f| name(f) == "_SUCCESS");
        let relative = directory.strip_prefix(table).unwrap().display();
        let mark = if success { ", _SUCCESS" } else { "" };
        text.push_str(&format!("{relative}: {rows} rows{mark}\n"));
    }
    text
}

fn collect_directories(directory: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(directory).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.push(path.clone());
            collect_directories(&path, out);
        }
    }
}
