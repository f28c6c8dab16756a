//! Golden plans: every script under `tests/plans/`, every example of `examples/`, and every
//! Nexmark query of the benchmark (`bench/queries/nexmark/`, over the generator's tables)
//! is planned, and its `EXPLAIN` text (operators, changelog kinds, parallelism,
//! exchanges) must equal its `.plan` file under `tests/plans/`, checked in for reviewers to
//! read.
//!
//! After a deliberate planner change, re-bless the files and review the diff:
//! `EDDY_BLESS=1 cargo test -p eddy-planner --test golden_plans`.

// A test crate: a failed unwrap is a failed test (clippy.toml allows it in #[test] code).
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

/// The Nexmark tables the benchmark's queries read, at parallelism 2.
const NEXMARK_TABLES: &str = "SET 'parallelism.default' = '2';
CREATE TABLE person (id BIGINT, name STRING, emailAddress STRING, creditCard STRING,
  city STRING, `state` STRING, dateTime TIMESTAMP(3), extra STRING,
  WATERMARK FOR dateTime AS dateTime - INTERVAL '4' SECOND)
  WITH ('connector' = 'nexmark', 'nexmark.table' = 'person', 'events.num' = '1000');
CREATE TABLE auction (id BIGINT, itemName STRING, description STRING, initialBid BIGINT,
  reserve BIGINT, dateTime TIMESTAMP(3), expires TIMESTAMP(3), seller BIGINT, category BIGINT,
  extra STRING, WATERMARK FOR dateTime AS dateTime - INTERVAL '4' SECOND)
  WITH ('connector' = 'nexmark', 'nexmark.table' = 'auction', 'events.num' = '1000');
CREATE TABLE bid (auction BIGINT, bidder BIGINT, price BIGINT, channel STRING, url STRING,
  dateTime TIMESTAMP(3), extra STRING, p_time AS PROCTIME(),
  WATERMARK FOR dateTime AS dateTime - INTERVAL '4' SECOND)
  WITH ('connector' = 'nexmark', 'nexmark.table' = 'bid', 'events.num' = '1000');
CREATE TABLE person_versions (id BIGINT, name STRING, emailAddress STRING, creditCard STRING,
  city STRING, `state` STRING, dateTime TIMESTAMP(3), extra STRING, PRIMARY KEY (id) NOT ENFORCED,
  WATERMARK FOR dateTime AS dateTime - INTERVAL '4' SECOND)
  WITH ('connector' = 'nexmark', 'nexmark.table' = 'person', 'events.num' = '1000');
CREATE TABLE side_input (key BIGINT, `value` STRING)
  WITH ('connector' = 'filesystem', 'path' = '/nonexistent/side_input', 'format' = 'csv');
";

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).to_path_buf()
}

/// The `.sql` files of `dir`, sorted, without `skip`.
fn scripts(dir: &Path, skip: &[&str]) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "sql"))
        .filter(|path| !skip.iter().any(|s| path.file_name().unwrap() == *s))
        .collect();
    files.sort();
    files
}

/// Plans `script` and compares its plan with `expected` (or writes it, blessing).
/// Returns a description of the mismatch, if any.
fn check(name: &str, script: &str, expected: &Path) -> Option<String> {
    let actual = match eddy_planner::plan(script, &[], eddy_planner::PlanningContext::CHECKING) {
        Ok(graph) => graph.explain(),
        Err(error) => format!("error: {error}\n"),
    };
    if std::env::var_os("EDDY_BLESS").is_some() {
        std::fs::write(expected, &actual).unwrap();
        return None;
    }
    match std::fs::read_to_string(expected) {
        Ok(golden) if golden == actual => None,
        Ok(golden) => Some(format!(
            "{name}: the plan differs from {}\n--- expected\n{golden}--- actual\n{actual}",
            expected.display()
        )),
        Err(_) => Some(format!(
            "{name}: no {} (run with EDDY_BLESS=1 to write it); its plan is\n{actual}",
            expected.display()
        )),
    }
}

fn assert_all(mismatches: Vec<String>) {
    assert!(
        mismatches.is_empty(),
        "{}\nIf the change is deliberate: EDDY_BLESS=1 cargo test -p eddy-planner --test golden_plans",
        mismatches.join("\n")
    );
}

#[test]
fn scripts_plan_as_their_golden_files_say() {
    let dir = root().join("tests/plans");
    let scripts = scripts(&dir, &[]);
    assert!(scripts.len() >= 5, "golden scripts are missing");
    let mismatches = scripts
        .iter()
        .filter_map(|path| {
            let script = std::fs::read_to_string(path).unwrap();
            let name = path.file_stem().unwrap().to_string_lossy();
            check(&name, &script, &path.with_extension("plan"))
        })
        .collect();
    assert_all(mismatches);
}

#[test]
fn examples_plan_as_their_golden_files_say() {
    let examples = root().join("../examples");
    let golden = root().join("tests/plans/examples");
    let mismatches = scripts(&examples, &[])
        .iter()
        .filter_map(|path| {
            let script = std::fs::read_to_string(path).unwrap();
            let name = path.file_stem().unwrap().to_string_lossy().to_string();
            check(&name, &script, &golden.join(format!("{name}.plan")))
        })
        .collect();
    assert_all(mismatches);
}

#[test]
fn nexmark_queries_plan_as_their_golden_files_say() {
    let queries = root().join("../bench/queries/nexmark");
    let sinks = std::fs::read_to_string(queries.join("sinks.sql")).unwrap();
    let golden = root().join("tests/plans/nexmark");
    let mismatches = scripts(&queries, &["sinks.sql"])
        .iter()
        .filter_map(|path| {
            let query = std::fs::read_to_string(path).unwrap();
            let name = path.file_stem().unwrap().to_string_lossy().to_string();
            let script = format!("{NEXMARK_TABLES}{sinks}\n{query}");
            check(&name, &script, &golden.join(format!("{name}.plan")))
        })
        .collect();
    assert_all(mismatches);
}
