//! Every script in `examples/` runs to completion and prints what it promises.

use crate::support::{eddy, explain_ok, materialize, parse_changes};

fn run_example(name: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples")
        .join(name);
    let output = eddy().arg("run").arg(&path).output().unwrap();
    assert!(
        output.status.success(),
        "{name}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn hot_auctions_retracts_as_counts_grow() {
    let stdout = run_example("hot_auctions.sql");
    let changes = parse_changes(&stdout);
    assert!(
        changes.iter().any(|c| c.op == "-U"),
        "a growing count retracts its old row"
    );
    let result = materialize(&changes);
    assert!(!result.is_empty());
    assert!(
        result
            .keys()
            .all(|row| row[0].parse::<i64>().unwrap() % 100 == 0)
    );
}

#[test]
fn windowed_bids_emit_each_window_once() {
    let changes = parse_changes(&run_example("windowed_bids.sql"));
    assert!(!changes.is_empty());
    assert!(
        changes.iter().all(|c| c.op == "+I"),
        "windows are append-only"
    );
    let mut keys: Vec<_> = changes
        .iter()
        .map(|c| (c.fields[0].clone(), c.fields[2].clone()))
        .collect();
    let total = keys.len();
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), total, "a window and auction appear once");
}

#[test]
fn session_clicks_split_sessions_at_pauses() {
    let changes = parse_changes(&run_example("session_clicks.sql"));
    // Clicks of one user come every 2 s (4 users, one click every 500 ms), and every 7th
    // click adds a 4 s pause, so each user's sessions break at those pauses.
    assert!(changes.iter().all(|c| c.op == "+I"));
    let total: i64 = changes
        .iter()
        .map(|c| c.fields[3].parse::<i64>().unwrap())
        .sum();
    assert_eq!(total, 70, "every click is in exactly one session");
    let users: std::collections::BTreeSet<_> =
        changes.iter().map(|c| c.fields[0].clone()).collect();
    assert_eq!(users.len(), 4);
    assert!(changes.len() > 4, "pauses split sessions");
}

#[test]
fn the_docker_compose_example_plans() {
    // It runs against the compose cluster (see integration-tests/docker.rs); here its plan
    // is checked: an upsert into the PostgreSQL sink, no update-before.
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/cluster_exactly_once.sql");
    let plan = explain_ok(&path);
    assert!(plan.contains("bids_per_auction"), "{plan}");
}
