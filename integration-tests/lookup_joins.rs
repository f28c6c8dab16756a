//! Lookup joins against a real PostgreSQL: each row joins the rows its key holds when it
//! is processed. Without a cache a change in the table is seen by the rows that come after
//! it; with `lookup.cache` = 'PARTIAL' the rows read before are used until they expire.
//! A LEFT lookup join pads the rows whose key the table does not hold.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::postgres::Postgres;
use crate::processes::Cluster;
use crate::support::parse_changes;

/// 1,200 rows, 200 a second, of keys `id % 200`; customers hold the even keys.
fn job(pg: &Postgres, id: &str, join: &str, cache: &str) -> String {
    format!(
        "CREATE TABLE t (id BIGINT, p AS PROCTIME()) WITH ('connector' = 'datagen',
           'rows-per-second' = '200', 'number-of-rows' = '1200', 'fields.id.kind' = 'sequence',
           'fields.id.start' = '0', 'fields.id.end' = '1199');
         CREATE TABLE customers (id BIGINT, name STRING, tier INT) WITH (
           'connector' = 'postgres', 'url' = '{}', 'table' = 'customers'{cache});
         CREATE TABLE o (id BIGINT, k BIGINT, name STRING, tier INT)
           WITH ('connector' = 'print', 'print-identifier' = '{id}');
         INSERT INTO o SELECT t.id, t.id % 200, c.name, c.tier
           FROM t {join} customers FOR SYSTEM_TIME AS OF t.p AS c ON t.id % 200 = c.id;",
        pg.url()
    )
}

/// Per stream row id, the (key, name, tier) it was joined with, in the order printed.
fn joined(cluster: &Cluster, id: &str) -> Vec<(i64, i64, String, String)> {
    parse_changes(&cluster.printed_by(id))
        .into_iter()
        .map(|c| {
            assert_eq!(c.op, "+I");
            (
                c.fields[0].parse().unwrap(),
                c.fields[1].parse().unwrap(),
                c.fields[2].clone(),
                c.fields[3].clone(),
            )
        })
        .collect()
}

/// Runs the jobs `(id, script)` at once and renames every customer once each job printed
/// rows; waits for them to finish.
fn run_renaming_midway(cluster: &Cluster, pg: &Postgres, jobs: &[(&str, String)]) {
    let ids: Vec<String> = jobs.iter().map(|(_, s)| cluster.submit(s, 1)).collect();
    let started = Instant::now();
    while jobs.iter().any(|(id, _)| joined(cluster, id).len() < 100) {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the jobs print nothing"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    pg.execute("UPDATE customers SET name = 'renamed-' || id, tier = tier + 100");
    for id in ids {
        cluster.wait_for(&id, "FINISHED", Duration::from_secs(120));
    }
}

#[test]
fn lookup_joins_read_postgres_as_of_each_row_with_and_without_a_cache() {
    let pg = Postgres::start("lookup");
    pg.execute(
        "CREATE TABLE customers (id BIGINT PRIMARY KEY, name TEXT, tier INT);
         INSERT INTO customers SELECT i, 'customer-' || i, i % 3 FROM generate_series(0, 198, 2) i;",
    );
    let cluster = Cluster::start("lookup", 1, 3);
    let cached = ", 'lookup.cache' = 'PARTIAL', 'lookup.partial-cache.max-rows' = '1000',
        'lookup.partial-cache.expire-after-write' = '1h'";
    run_renaming_midway(
        &cluster,
        &pg,
        &[
            ("plain", job(&pg, "plain", "JOIN", "")),
            ("left", job(&pg, "left", "LEFT JOIN", "")),
            ("cached", job(&pg, "cached", "JOIN", cached)),
        ],
    );
    let original = |k: i64| (format!("customer-{k}"), (k % 3).to_string());
    let renamed = |k: i64| (format!("renamed-{k}"), (k % 3 + 100).to_string());

    // Inner: each row of an even key once, with the customer as it was when looked up:
    // the original before the rename, the renamed one after it (never back).
    let plain = joined(&cluster, "plain");
    let ids: Vec<i64> = plain.iter().map(|r| r.0).collect();
    assert_eq!(ids, (0..1200).filter(|i| i % 2 == 0).collect::<Vec<_>>());
    let mut seen_renamed = BTreeMap::new();
    for (id, k, name, tier) in &plain {
        let row = (name.clone(), tier.clone());
        if row == renamed(*k) {
            seen_renamed.insert(*k, *id);
        } else {
            assert_eq!(row, original(*k), "row {id}");
            assert!(
                !seen_renamed.contains_key(k),
                "row {id} of key {k} went back"
            );
        }
    }
    assert!(!seen_renamed.is_empty(), "rows after the rename see it");
    assert!(
        plain
            .last()
            .is_some_and(|(_, k, name, _)| *name == renamed(*k).0)
    );

    // Left: every row, those of odd keys padded.
    let left = joined(&cluster, "left");
    assert_eq!(left.len(), 1200);
    assert!(
        left.iter()
            .all(|(_, k, name, _)| (k % 2 == 1) == (name == "null"))
    );

    // Cached for an hour: every key was read before the rename and is never read again.
    let cached = joined(&cluster, "cached");
    assert_eq!(cached.len(), 600);
    for (id, k, name, tier) in &cached {
        assert_eq!((name.clone(), tier.clone()), original(*k), "row {id}");
    }
}
