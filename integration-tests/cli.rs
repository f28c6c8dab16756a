//! The command line: errors name what and where, exit non-zero, never panic.

use crate::support::{Scratch, eddy, explain_ok};

fn run_fails_with(script: &str, expected: &[&str]) {
    let scratch = Scratch::new("cli");
    let file = scratch.write("job.sql", script);
    let output = eddy().arg("run").arg(&file).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    for text in expected {
        assert!(stderr.contains(text), "expected {text:?} in:\n{stderr}");
    }
}

const TABLES: &str = "CREATE TABLE t (id BIGINT) WITH ('connector' = 'datagen', 'number-of-rows' = '5');\nCREATE TABLE o (id BIGINT) WITH ('connector' = 'print');\n";

#[test]
fn syntax_error_names_line_and_column() {
    run_fails_with(
        &format!("{TABLES}INSERT INTO o SELECT id FROM t WHERE id >;"),
        &["3:42", "expression"],
    );
}

#[test]
fn unknown_column_names_line_and_column() {
    run_fails_with(
        &format!("{TABLES}INSERT INTO o\nSELECT idd FROM t;"),
        &["4:8", "idd"],
    );
}

#[test]
fn unknown_table_lists_the_declared_ones() {
    run_fails_with(
        &format!("{TABLES}INSERT INTO o SELECT id FROM nope;"),
        &["nope", "declared: o, t"],
    );
}

#[test]
fn unknown_connector_and_option_name_the_valid_ones() {
    run_fails_with(
        "CREATE TABLE t (id BIGINT) WITH ('connector' = 'kafkaa');",
        &["1:1", "unknown connector 'kafkaa'", "datagen, filesystem"],
    );
    run_fails_with(
        "CREATE TABLE t (id BIGINT) WITH ('connector' = 'datagen', 'rows-per-sec' = '5');",
        &["unknown option 'rows-per-sec'", "rows-per-second"],
    );
    run_fails_with(
        "SET 'paralelism.default' = '2';",
        &["1:1", "parallelism.default"],
    );
}

#[test]
fn updates_into_an_append_only_sink_are_refused() {
    run_fails_with(
        "CREATE TABLE t (id BIGINT) WITH ('connector' = 'datagen', 'number-of-rows' = '5');
         CREATE TABLE o (id BIGINT, c BIGINT) WITH ('connector' = 'filesystem', 'path' = '/tmp/eddy-never', 'format' = 'csv');
         INSERT INTO o SELECT id, COUNT(*) FROM t GROUP BY id;",
        &["accepts only inserts", "retract"],
    );
}

#[test]
fn unsupported_queries_say_what_is_unsupported() {
    run_fails_with(
        &format!("{TABLES}INSERT INTO o SELECT id FROM t ORDER BY id;"),
        &["ORDER BY"],
    );
    run_fails_with(
        &format!("{TABLES}INSERT INTO o SELECT STDDEV(id) FROM t;"),
        &["STDDEV", "supported: COUNT"],
    );
}

#[test]
fn missing_file_is_a_one_line_error() {
    let output = eddy()
        .args(["run", "/nonexistent/job.sql"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
}

#[test]
fn explain_shows_changelog_parallelism_and_exchange() {
    let scratch = Scratch::new("explain");
    let file = scratch.write(
        "job.sql",
        "SET 'parallelism.default' = '3';
         CREATE TABLE t (id BIGINT, k AS id % 5) WITH ('connector' = 'datagen', 'number-of-rows' = '5');
         CREATE TABLE o (k BIGINT, c BIGINT) WITH ('connector' = 'print');
         INSERT INTO o SELECT k, COUNT(*) FROM t GROUP BY k;",
    );
    let plan = explain_ok(&file);
    for text in [
        "Source: t [datagen]",
        "changelog=append-only",
        "GroupAggregate",
        "changelog=retract",
        "parallelism=3",
        "hash(",
        "Sink: o [print]",
    ] {
        assert!(plan.contains(text), "expected {text:?} in:\n{plan}");
    }
}

#[test]
fn interrupt_stops_an_unbounded_job_cleanly() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;

    let scratch = Scratch::new("interrupt");
    let file = scratch.write(
        "job.sql",
        "CREATE TABLE t (id BIGINT) WITH ('connector' = 'datagen', 'rows-per-second' = '200',
           'fields.id.kind' = 'sequence', 'fields.id.start' = '1', 'fields.id.end' = '100000000');
         CREATE TABLE o (id BIGINT) WITH ('connector' = 'print');
         INSERT INTO o SELECT id FROM t;",
    );
    let mut child = eddy()
        .arg("run")
        .arg(&file)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    for _ in 0..20 {
        let line = lines.next().expect("the job prints rows").unwrap();
        assert!(line.starts_with("+I["), "{line}");
    }
    let status = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let rest: Vec<String> = lines.map(Result::unwrap).collect();
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "a stopped job exits 0: {stderr}");
    assert!(stderr.contains("stopping"), "{stderr}");
    // The rows printed after the interrupt continue the sequence without a gap.
    let ids: Vec<i64> = rest
        .iter()
        .map(|l| {
            l.trim_start_matches("+I[")
                .trim_end_matches(']')
                .parse()
                .unwrap()
        })
        .collect();
    assert!(ids.windows(2).all(|w| w[1] == w[0] + 1), "{ids:?}");
}

#[test]
fn run_shows_a_progress_line_on_a_terminal_and_nothing_elsewhere() {
    let scratch = Scratch::new("progress");
    let script = "CREATE TABLE bid (auction BIGINT, price BIGINT) WITH ('connector' = 'nexmark',
           'nexmark.table' = 'bid', 'events.num' = '200000', 'events.rate' = '100000');
         CREATE TABLE o (auction BIGINT, bids BIGINT) WITH ('connector' = 'blackhole');
         INSERT INTO o SELECT auction, COUNT(*) FROM bid GROUP BY auction;";
    let file = scratch.write("job.sql", script);
    // Not a terminal: nothing but what the job writes.
    let plain = eddy().arg("run").arg(&file).output().unwrap();
    assert!(plain.status.success());
    let stderr = String::from_utf8_lossy(&plain.stderr);
    assert!(!stderr.contains("events/s"), "{stderr}");
    // On a terminal (util-linux `script` gives it one): the live line, ending with the
    // final count.
    let command = format!("{} run {}", env!("CARGO_BIN_EXE_eddy"), file.display());
    let tty = std::process::Command::new("script")
        .args(["-qec", &command, "/dev/null"])
        .env("EDDY_LOG", "warn")
        .output()
        .expect("util-linux `script` (apt-get install bsdutils)");
    assert!(
        tty.status.success(),
        "{}",
        String::from_utf8_lossy(&tty.stderr)
    );
    let shown = String::from_utf8_lossy(&tty.stdout);
    let redraws = shown.matches("\x1b[2K").count();
    assert!(
        redraws >= 2,
        "the line is redrawn while the job runs: {shown:?}"
    );
    // 46 of every 50 Nexmark events are bids.
    let last = shown.trim_end().rsplit("\x1b[2K").next().unwrap();
    assert!(last.starts_with("read 184.0k events"), "{shown:?}");
}
