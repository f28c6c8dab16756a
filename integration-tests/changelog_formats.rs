//! Change streams read as Flink reads them: one simulated history of two database tables,
//! written as Debezium (with and without its schema), Canal (multi-row statements, values as
//! strings, DDL events) and Maxwell would write it (`changelog_formats/generate.py`), read
//! through the `debezium-json`, `canal-json` and `maxwell-json` formats. Every query of
//! `changelog_formats/` — the tables mirrored, aggregates over their updates and deletes,
//! aggregates of aggregates, joins (inner and outer) of two change streams, a Top-N and a
//! deduplication over one — gives Apache Flink's final rows at parallelism 1 and 4, and
//! what Flink refuses over a change stream (an OVER aggregate) Eddy refuses. A window TVF
//! aggregate over a change stream, which Flink 2.3 computes, Eddy refuses as unsupported
//! (a gap, not a difference: `window_over_changes.flink` holds Flink's answer). The
//! filesystem's metadata columns (`file.name`, `file.size`, `file.path`,
//! `file.modification-time`) are read beside the changes of a directory of two files.

use crate::flink_oracle::OracleDir;
use crate::support::{Scratch, run_script};

#[test]
fn change_streams_give_flinks_rows() {
    OracleDir::new("changelog_formats").check_all(&[
        "mirror_debezium",
        "mirror_canal",
        "mirror_maxwell",
        "customers_both",
        "totals_debezium",
        "totals_canal",
        "totals_maxwell",
        "by_status",
        "filtered",
        "totals_of_totals",
        "join_rows",
        "join_totals",
        "left_join",
        "top2",
        "latest_per_customer",
        "over_refused",
        "file_metadata",
    ]);
}

/// The queries that keep keyed state, on the LSM state backend with the least memory it
/// takes, give the same rows.
#[test]
fn change_streams_on_the_lsm_backend_give_flinks_rows() {
    OracleDir::new("changelog_formats")
        .on_the_lsm_backend()
        .check_all(&[
            "totals_debezium",
            "totals_of_totals",
            "join_totals",
            "left_join",
            "top2",
            "latest_per_customer",
        ]);
}

/// Flink aggregates window TVFs over change streams; Eddy does not yet, and says so
/// rather than answering differently.
#[test]
fn a_window_aggregate_over_changes_is_refused_as_unsupported() {
    let oracle = OracleDir::new("changelog_formats");
    assert!(oracle.file("window_over_changes.flink").lines().count() > 5);
    let scratch = Scratch::new("changelog-window");
    let tables = oracle.file("tables.sql").replace(
        "$DIR",
        &format!(
            "{}/integration-tests/changelog_formats",
            env!("CARGO_MANIFEST_DIR")
        ),
    );
    let query = oracle.file("window_over_changes.sql");
    let script = format!(
        "{tables}
CREATE TABLE answer (w STRING, n STRING) WITH ('connector' = 'print');
         INSERT INTO answer {query};
"
    );
    let output = run_script(&scratch, &script, 1);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(
        stderr.contains("unsupported: a window TVF over an updating"),
        "{stderr}"
    );
}

/// The three formats carry one history: their final tables are equal (a check of the
/// formats against each other, beside Flink's answers).
#[test]
fn every_format_gives_the_same_table() {
    let oracle = OracleDir::new("changelog_formats");
    let answers: Vec<String> = ["mirror_debezium", "mirror_canal", "mirror_maxwell"]
        .iter()
        .map(|q| oracle.file(&format!("{q}.flink")))
        .collect();
    assert!(answers[0].lines().count() > 100, "the history leaves rows");
    assert_eq!(answers[0], answers[1]);
    assert_eq!(answers[0], answers[2]);
}

/// A change stream cannot go where only inserts may: the error names the table and the
/// source of the updates; and a table in a changelog format cannot be written.
#[test]
fn updates_are_refused_where_only_inserts_go() {
    let scratch = Scratch::new("changelog-refusals");
    let dir = OracleDir::new("changelog_formats");
    let tables = dir.file("tables.sql").replace(
        "$DIR",
        &format!(
            "{}/integration-tests/changelog_formats",
            env!("CARGO_MANIFEST_DIR")
        ),
    );
    let out = scratch.path().join("out");
    let script = format!(
        "{tables}\nCREATE TABLE out_files (id BIGINT, amount BIGINT) WITH ('connector' = \
         'filesystem', 'path' = '{}', 'format' = 'json');\n\
         INSERT INTO out_files SELECT id, amount FROM orders_canal;\n",
        out.display()
    );
    let output = run_script(&scratch, &script, 1);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(
        stderr.contains("accepts only inserts")
            && stderr.contains("the changelog source 'orders_canal'"),
        "{stderr}"
    );
    let script = format!(
        "{tables}\nINSERT INTO orders_maxwell SELECT id, customer_id, amount, status, ts \
         FROM orders_debezium;\n"
    );
    let output = run_script(&scratch, &script, 1);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(
        stderr.contains("unsupported: writing the 'maxwell-json' format"),
        "{stderr}"
    );
}

/// Debezium delivers at least once: with `table.exec.source.cdc-events-duplicate`, a
/// changelog source with a primary key is normalized by it, so every change delivered
/// twice still gives Flink's answer for the history delivered once; without it each
/// repeat counts, as in Flink.
#[test]
fn repeated_changes_are_deduplicated_by_the_primary_key_when_asked() {
    let oracle = OracleDir::new("changelog_formats");
    let scratch = Scratch::new("changelog-duplicates");
    let twice: String = oracle
        .file("orders.debezium.json")
        .lines()
        .flat_map(|line| [line, line])
        .map(|line| format!("{line}\n"))
        .collect();
    let file = scratch.write("orders-twice.json", &twice);
    let script = |option: &str, backend: &str| {
        format!(
            "SET 'table.exec.source.cdc-events-duplicate' = '{option}';
             SET 'state.backend.type' = '{backend}';
             CREATE TABLE orders (id BIGINT, customer_id BIGINT, amount BIGINT, status STRING,
               ts TIMESTAMP(3), PRIMARY KEY (id) NOT ENFORCED)
               WITH ('connector' = 'filesystem', 'path' = '{}', 'format' = 'debezium-json');
             CREATE TABLE answer (a STRING, b STRING, c STRING, d STRING, e STRING)
               WITH ('connector' = 'print');
             INSERT INTO answer {};",
            file.display(),
            oracle
                .file("totals_debezium.sql")
                .trim()
                .replace("orders_debezium", "orders")
        )
    };
    let expected: Vec<String> = oracle
        .file("totals_debezium.flink")
        .lines()
        .map(str::to_string)
        .collect();
    // The normalization keeps its rows in memory, then in an LSM store.
    for (parallelism, backend) in [(1, "hashmap"), (3, "rocksdb")] {
        let output = run_script(&scratch, &script("true", backend), parallelism);
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        assert_eq!(
            final_rows(&String::from_utf8_lossy(&output.stdout)),
            expected,
            "deduplicated at parallelism {parallelism} on {backend}"
        );
    }
    let output = run_script(&scratch, &script("false", "hashmap"), 2);
    assert!(output.status.success());
    assert_ne!(
        final_rows(&String::from_utf8_lossy(&output.stdout)),
        expected,
        "repeats count without the option"
    );
    // The option needs a primary key to deduplicate by.
    let keyless = script("true", "hashmap").replace(", PRIMARY KEY (id) NOT ENFORCED", "");
    let output = run_script(&scratch, &keyless, 1);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success() && stderr.contains("needs every changelog source"),
        "{stderr}"
    );
}

/// A print sink's changes applied, each final row as `v1, v2, ...`, sorted.
fn final_rows(stdout: &str) -> Vec<String> {
    let mut rows: Vec<String> = crate::support::materialize(&crate::support::parse_changes(stdout))
        .into_iter()
        .flat_map(|(row, n)| std::iter::repeat_n(row.join(", "), n))
        .collect();
    rows.sort();
    rows
}
