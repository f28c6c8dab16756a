//! Streaming joins, run at parallelism 1 and 4 against results the tests compute: appending
//! inputs, updating inputs whose retractions must take joined rows back, a window
//! aggregate joined back to its own input (Nexmark q7's shape), and the joins Eddy refuses
//! (outer joins are checked against Flink in `outer_joins.rs`).

use std::collections::BTreeMap;

use crate::golden::{CUSTOMERS, Order, orders, orders_table, write_orders};
use crate::row;
use crate::support::{Scratch, assert_result_in, run_script};

/// Each customer's tier and the smallest order amount the tier counts.
const TIERS: [(&str, &str, i64); 4] = [
    ("ann", "gold", 100),
    ("bob", "silver", 500),
    ("cid", "gold", 0),
    ("eve", "bronze", 900),
];

/// A customer's tier and smallest counted amount, if the customer has a tier.
fn tier(customer: &str) -> Option<(&'static str, i64)> {
    TIERS
        .iter()
        .find(|t| t.0 == customer)
        .map(|(_, tier, min)| (*tier, *min))
}

/// A scratch directory named `name` holding 600 orders in `orders/` (4 files) and the
/// customers in `customers/`; the orders, and the script declaring both tables and a print
/// sink `out` with `sink` columns, before `query`.
fn setup(name: &str, sink: &str, query: &str) -> (Scratch, Vec<Order>, String) {
    let scratch = Scratch::new(name);
    let data = orders(600);
    let script = script(&scratch, &data, sink, query);
    (scratch, data, script)
}

/// The script of [`setup`] over `data`.
fn script(scratch: &Scratch, data: &[Order], sink: &str, query: &str) -> String {
    write_orders(scratch, data, 4);
    let customers: String = TIERS
        .iter()
        .map(|(name, tier, min)| format!("{name},{tier},{min}\n"))
        .collect();
    scratch.write("customers/all.csv", &customers);
    format!(
        "{}CREATE TABLE customers (name STRING, tier STRING, min_amount BIGINT)
           WITH ('connector' = 'filesystem', 'path' = '$DIR/customers', 'format' = 'csv');
         CREATE TABLE out ({sink}) WITH ('connector' = 'print');
         {query}",
        orders_table("1")
    )
    .replace("$DIR", &scratch.path().display().to_string())
}

#[test]
fn appending_inputs_join_on_a_key_and_the_rest_of_the_condition() {
    // `dan` has no tier: his orders join nothing.
    let (scratch, data, script) = setup(
        "join-append",
        "id BIGINT, customer STRING, tier STRING, amount BIGINT",
        "INSERT INTO out
         SELECT o.id, o.customer, c.tier, o.amount
         FROM orders AS o JOIN customers AS c
           ON o.customer = c.name AND o.amount >= c.min_amount;",
    );
    let expected = data
        .iter()
        .filter_map(|o| {
            let (tier, min) = tier(o.customer)?;
            (o.amount >= min).then(|| row![o.id, o.customer, tier, o.amount])
        })
        .collect();
    assert_result_in(&scratch, &script, expected);
}

#[test]
fn updating_inputs_retract_the_rows_they_joined() {
    // Both sides are GROUP BY results: every update retracts the joined row it replaces
    // (a retraction of a row that was never printed fails the test).
    let (scratch, data, script) = setup(
        "join-retract",
        "customer STRING, c BIGINT, even_max BIGINT, tier STRING",
        "INSERT INTO out
         SELECT a.customer, a.c, b.hi, c.tier
         FROM (SELECT customer, COUNT(*) AS c FROM orders GROUP BY customer) AS a
         JOIN (SELECT customer, MAX(amount) AS hi FROM orders WHERE amount % 2 = 0
               GROUP BY customer) AS b ON a.customer = b.customer
         JOIN customers AS c ON c.name = b.customer;",
    );
    let mut counts: BTreeMap<&str, (i64, i64)> = BTreeMap::new();
    for o in &data {
        let entry = counts.entry(o.customer).or_insert((0, i64::MIN));
        entry.0 += 1;
        if o.amount % 2 == 0 {
            entry.1 = entry.1.max(o.amount);
        }
    }
    let expected = CUSTOMERS
        .iter()
        .filter_map(|name| {
            let (tier, _) = tier(name)?;
            let (c, hi) = counts[name];
            Some(row![name, c, hi, tier])
        })
        .collect();
    assert_result_in(&scratch, &script, expected);
}

#[test]
fn a_window_maximum_joins_back_to_its_rows() {
    // Nexmark q7's shape: the orders at each 10 s window's highest amount.
    let (scratch, data, script) = setup(
        "join-window",
        "id BIGINT, amount BIGINT, we BIGINT",
        "INSERT INTO out
         SELECT o.id, o.amount, CAST(w.window_end AS BIGINT)
         FROM orders AS o
         JOIN (SELECT MAX(amount) AS top, window_end
               FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '10' SECOND))
               GROUP BY window_start, window_end) AS w
           ON o.amount = w.top
         WHERE o.ts BETWEEN w.window_end - INTERVAL '10' SECOND AND w.window_end;",
    );
    let mut tops: BTreeMap<i64, i64> = BTreeMap::new();
    for o in &data {
        let end = (o.t_ms / 10_000 + 1) * 10_000;
        let top = tops.entry(end).or_insert(i64::MIN);
        *top = (*top).max(o.amount);
    }
    let mut expected = Vec::new();
    for (end, top) in &tops {
        for o in &data {
            if o.amount == *top && (end - 10_000..=*end).contains(&o.t_ms) {
                expected.push(row![o.id, o.amount, end]);
            }
        }
    }
    assert!(expected.len() >= tops.len());
    assert_result_in(&scratch, &script, expected);
}

/// Joins Eddy cannot run as Flink does are refused with the reason: without a key, a
/// NOT IN whose NULLs would need three-valued logic, a subquery under OR, a scalar subquery.
#[test]
fn keyless_joins_and_null_aware_subqueries_are_refused_with_a_reason() {
    let scratch = Scratch::new("join-refused");
    let data = orders(10);
    for (query, reason) in [
        (
            "INSERT INTO out SELECT o.id FROM orders AS o WHERE o.customer NOT IN (SELECT name FROM customers);",
            "unsupported: NOT IN (SELECT ...) where either side may be NULL",
        ),
        (
            "INSERT INTO out SELECT o.id FROM orders AS o WHERE o.amount > 10 OR o.customer IN (SELECT name FROM customers);",
            "unsupported: a subquery under OR or NOT",
        ),
        (
            "INSERT INTO out SELECT o.id FROM orders AS o WHERE o.amount > (SELECT MAX(min_amount) FROM customers);",
            "unsupported: a subquery in an expression",
        ),
        (
            "INSERT INTO out SELECT o.id FROM orders AS o JOIN customers AS c ON o.amount > c.min_amount;",
            "a join without an equality between its two sides",
        ),
    ] {
        let script = script(&scratch, &data, "id BIGINT", query);
        let output = run_script(&scratch, &script, 1);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{query} ran");
        assert!(stderr.contains(reason), "{query}: {stderr}");
    }
}

/// `eddy run --metrics` reports each stateful operator's state size at its last checkpoint
/// (the final one of a bounded job): the join's and the aggregate's, none for stateless ones.
#[test]
fn metrics_report_the_state_size_of_stateful_operators() {
    let scratch = Scratch::new("state-size");
    let file = scratch.write(
        "job.sql",
        "SET 'execution.checkpointing.interval' = '200ms';
         CREATE TABLE bid (auction BIGINT, price BIGINT) WITH ('connector' = 'nexmark',
           'nexmark.table' = 'bid', 'events.num' = '20000');
         CREATE TABLE auction (id BIGINT, category BIGINT) WITH ('connector' = 'nexmark',
           'nexmark.table' = 'auction', 'events.num' = '20000');
         CREATE TABLE o (category BIGINT, c BIGINT) WITH ('connector' = 'blackhole');
         INSERT INTO o SELECT a.category, COUNT(*) FROM bid AS b JOIN auction AS a
           ON b.auction = a.id GROUP BY a.category;",
    );
    let output = crate::support::eddy()
        .current_dir(scratch.path())
        .args(["run", "--metrics", "-p", "1"])
        .arg(&file)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let state = |operator: &str| -> u64 {
        stderr
            .lines()
            .filter(|l| l.contains(operator))
            .filter_map(|l| l.split_whitespace().last()?.parse::<u64>().ok())
            .sum()
    };
    // 1,200 auctions and 18,400 bids held by the join; 10 categories' counts.
    assert!(state(":Join") > 18_400 * 8, "{stderr}");
    assert!(state(":GroupAggregate") > 0, "{stderr}");
    assert_eq!(state(":Calc"), 0, "{stderr}");
}
