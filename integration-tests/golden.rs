//! Golden tests: SQL scripts over deterministic inputs, run at parallelism 1 and 4; the
//! final result (changelog applied) must equal what the test computes on its own.

use std::collections::{BTreeMap, BTreeSet};

use crate::row;
use crate::support::{
    Scratch, assert_result, assert_result_in, float, materialize, materialize_upsert,
    parse_changes, run_script,
};

pub(crate) const CUSTOMERS: [&str; 5] = ["ann", "bob", "cid", "dan", "eve"];

/// One order of the test data.
#[derive(Debug, Clone)]
pub(crate) struct Order {
    pub(crate) id: i64,
    pub(crate) customer: &'static str,
    pub(crate) amount: i64,
    pub(crate) t_ms: i64,
}

/// `n` orders with pseudo-random customers and amounts and increasing times.
pub(crate) fn orders(n: i64) -> Vec<Order> {
    let mut state: u64 = 42;
    let mut next = move || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        state >> 33
    };
    let mut t_ms = 0;
    (1..=n)
        .map(|id| {
            t_ms += (next() % 700) as i64;
            Order {
                id,
                customer: CUSTOMERS[(next() % 5) as usize],
                amount: (next() % 1000) as i64,
                t_ms,
            }
        })
        .collect()
}

/// Writes the orders as CSV spread round-robin over `files` files in `orders/`, each file in
/// time order.
pub(crate) fn write_orders(scratch: &Scratch, orders: &[Order], files: usize) {
    for f in 0..files {
        let text: String = orders
            .iter()
            .skip(f)
            .step_by(files)
            .map(|o| format!("{},{},{},{}\n", o.id, o.customer, o.amount, o.t_ms))
            .collect();
        scratch.write(&format!("orders/part-{f}.csv"), &text);
    }
}

pub(crate) fn orders_table(delay: &str) -> String {
    format!(
        "CREATE TABLE orders (
           id BIGINT, customer STRING, amount BIGINT, t_ms BIGINT,
           ts AS TO_TIMESTAMP_MILLIS(t_ms),
           WATERMARK FOR ts AS ts - INTERVAL '{delay}' SECOND
         ) WITH ('connector' = 'filesystem', 'path' = '$DIR/orders', 'format' = 'csv');\n"
    )
}

/// Runs `query` (an INSERT into `out`) over 600 orders in 4 files, and compares with
/// `expected` computed from the orders.
fn check_orders(
    name: &str,
    sink: &str,
    query: &str,
    expected: impl Fn(&[Order]) -> Vec<Vec<String>>,
) {
    let scratch = Scratch::new(name);
    let data = orders(600);
    write_orders(&scratch, &data, 4);
    let script = format!(
        "{}CREATE TABLE out ({sink}) WITH ('connector' = 'print');\n{query}",
        orders_table("1")
    )
    .replace("$DIR", &scratch.path().display().to_string());
    assert_result_in(&scratch, &script, expected(&data));
}

#[test]
fn projection_and_arithmetic() {
    check_orders(
        "projection",
        "id BIGINT, a BIGINT, m BIGINT",
        "INSERT INTO out SELECT id, amount * 2 + 1, amount % 7 FROM orders;",
        |orders| {
            orders
                .iter()
                .map(|o| row![o.id, o.amount * 2 + 1, o.amount % 7])
                .collect()
        },
    );
}

#[test]
fn filter_case_and_string_functions() {
    check_orders(
        "filter",
        "id BIGINT, name STRING, size STRING, len INT",
        "INSERT INTO out
         SELECT id, UPPER(customer), CASE WHEN amount >= 500 THEN 'big' ELSE 'small' END,
                CAST(CHAR_LENGTH(customer) + 1 AS INT)
         FROM orders WHERE amount % 3 = 0;",
        |orders| {
            orders
                .iter()
                .filter(|o| o.amount % 3 == 0)
                .map(|o| {
                    let size = if o.amount >= 500 { "big" } else { "small" };
                    row![o.id, o.customer.to_uppercase(), size, o.customer.len() + 1]
                })
                .collect()
        },
    );
}

#[test]
fn cast_and_concatenation() {
    check_orders(
        "cast",
        "label STRING, quarter DOUBLE",
        "INSERT INTO out SELECT CAST(id AS STRING) || ':' || customer, CAST(amount AS DOUBLE) / 4 FROM orders WHERE id < 100;",
        |orders| {
            orders
                .iter()
                .filter(|o| o.id < 100)
                .map(|o| {
                    row![
                        format!("{}:{}", o.id, o.customer),
                        float(o.amount as f64 / 4.0)
                    ]
                })
                .collect()
        },
    );
}

/// Per customer: (count, sum, min, max) of the amounts of `orders` passing `keep`.
pub(crate) fn per_customer(
    orders: &[Order],
    keep: impl Fn(&Order) -> bool,
) -> BTreeMap<&'static str, (i64, i64, i64, i64)> {
    let mut groups: BTreeMap<&'static str, (i64, i64, i64, i64)> = BTreeMap::new();
    for o in orders.iter().filter(|o| keep(o)) {
        let g = groups
            .entry(o.customer)
            .or_insert((0, 0, i64::MAX, i64::MIN));
        g.0 += 1;
        g.1 += o.amount;
        g.2 = g.2.min(o.amount);
        g.3 = g.3.max(o.amount);
    }
    groups
}

#[test]
fn group_by_with_every_aggregate() {
    check_orders(
        "group-by",
        "customer STRING, c BIGINT, s BIGINT, lo BIGINT, hi BIGINT, av BIGINT, fav DOUBLE",
        "INSERT INTO out
         SELECT customer, COUNT(*), SUM(amount), MIN(amount), MAX(amount), AVG(amount),
           AVG(famount)
         FROM (SELECT *, CAST(amount AS DOUBLE) AS famount FROM orders) GROUP BY customer;",
        |orders| {
            // AVG of a BIGINT is a BIGINT, the sum divided by the count, as in Flink.
            per_customer(orders, |_| true)
                .into_iter()
                .map(|(k, (c, s, lo, hi))| row![k, c, s, lo, hi, s / c, float(s as f64 / c as f64)])
                .collect()
        },
    );
}

#[test]
fn count_distinct() {
    check_orders(
        "distinct",
        "customer STRING, d BIGINT",
        "INSERT INTO out SELECT customer, COUNT(DISTINCT amount % 10) FROM orders WHERE id <= 40 GROUP BY customer;",
        |orders| {
            let mut groups: BTreeMap<&str, BTreeSet<i64>> = BTreeMap::new();
            for o in orders.iter().filter(|o| o.id <= 40) {
                groups.entry(o.customer).or_default().insert(o.amount % 10);
            }
            groups.into_iter().map(|(k, v)| row![k, v.len()]).collect()
        },
    );
}

#[test]
fn global_aggregate() {
    check_orders(
        "global",
        "c BIGINT, s BIGINT, m BIGINT",
        "INSERT INTO out SELECT COUNT(*), SUM(amount), MAX(id) FROM orders;",
        |orders| {
            vec![row![
                orders.len(),
                orders.iter().map(|o| o.amount).sum::<i64>(),
                orders.len()
            ]]
        },
    );
}

#[test]
fn view_filter_and_having() {
    check_orders(
        "having",
        "customer STRING, c BIGINT",
        "CREATE VIEW big AS SELECT * FROM orders WHERE amount > 100;
         INSERT INTO out SELECT customer, COUNT(*) AS c FROM big GROUP BY customer HAVING COUNT(*) > 105;",
        |orders| {
            per_customer(orders, |o| o.amount > 100)
                .into_iter()
                .filter(|(_, g)| g.0 > 105)
                .map(|(k, g)| row![k, g.0])
                .collect()
        },
    );
}

#[test]
fn min_and_max_over_a_retracting_input() {
    check_orders(
        "min-retract",
        "cnt BIGINT, lo STRING, hi STRING, n BIGINT",
        "INSERT INTO out
         SELECT cnt, MIN(customer), MAX(customer), COUNT(*)
         FROM (SELECT customer, COUNT(*) AS cnt FROM orders WHERE id <= 60 GROUP BY customer)
         GROUP BY cnt;",
        |orders| {
            let mut by_count: BTreeMap<i64, Vec<&str>> = BTreeMap::new();
            for (k, g) in per_customer(orders, |o| o.id <= 60) {
                by_count.entry(g.0).or_default().push(k);
            }
            by_count
                .into_iter()
                .map(|(cnt, ks)| {
                    row![
                        cnt,
                        ks.iter().min().unwrap(),
                        ks.iter().max().unwrap(),
                        ks.len()
                    ]
                })
                .collect()
        },
    );
}

/// Counts and amount sums per (window start, customer) for windows given by `windows`.
pub(crate) fn windowed(
    orders: &[Order],
    windows: impl Fn(i64) -> Vec<(i64, i64)>,
    by_customer: bool,
) -> BTreeMap<(i64, i64, &'static str), (i64, i64)> {
    let mut groups = BTreeMap::new();
    for o in orders {
        for (start, end) in windows(o.t_ms) {
            let key = (start, end, if by_customer { o.customer } else { "" });
            let g = groups.entry(key).or_insert((0, 0));
            g.0 += 1;
            g.1 = g.1.max(o.amount);
        }
    }
    groups
}

#[test]
fn tumbling_window() {
    check_orders(
        "tumble",
        "ws BIGINT, we BIGINT, customer STRING, c BIGINT, hi BIGINT",
        "INSERT INTO out
         SELECT CAST(window_start AS BIGINT), CAST(window_end AS BIGINT), customer, COUNT(*), MAX(amount)
         FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '10' SECONDS))
         GROUP BY window_start, window_end, customer;",
        |orders| {
            windowed(orders, |t| vec![(t / 10_000 * 10_000, t / 10_000 * 10_000 + 10_000)], true)
                .into_iter()
                .map(|((s, e, k), (c, hi))| row![s, e, k, c, hi])
                .collect()
        },
    );
}

#[test]
fn hopping_window() {
    check_orders(
        "hop",
        "ws BIGINT, c BIGINT, hi BIGINT",
        "INSERT INTO out
         SELECT CAST(window_start AS BIGINT), COUNT(*), MAX(amount)
         FROM TABLE(HOP(TABLE orders, DESCRIPTOR(ts), INTERVAL '5' SECOND, INTERVAL '15' SECOND))
         GROUP BY window_start, window_end;",
        |orders| {
            let hops = |t: i64| {
                let last = t / 5000 * 5000;
                (0..3)
                    .map(|i| last - i * 5000)
                    .filter(|s| *s > t - 15_000)
                    .map(|s| (s, s + 15_000))
                    .collect()
            };
            windowed(orders, hops, false)
                .into_iter()
                .map(|((s, _, _), (c, hi))| row![s, c, hi])
                .collect()
        },
    );
}

#[test]
fn cumulating_window() {
    check_orders(
        "cumulate",
        "ws BIGINT, we BIGINT, c BIGINT",
        "INSERT INTO out
         SELECT CAST(window_start AS BIGINT), CAST(window_end AS BIGINT), COUNT(*)
         FROM TABLE(CUMULATE(TABLE orders, DESCRIPTOR(ts), INTERVAL '5' SECOND, INTERVAL '20' SECOND))
         GROUP BY window_start, window_end;",
        |orders| {
            let steps = |t: i64| {
                let start = t / 20_000 * 20_000;
                (1..=4).map(|k| (start, start + k * 5000)).filter(|(_, e)| *e > t).collect()
            };
            windowed(orders, steps, false).into_iter().map(|((s, e, _), (c, _))| row![s, e, c]).collect()
        },
    );
}

#[test]
fn session_window() {
    check_orders(
        "session",
        "customer STRING, ws BIGINT, we BIGINT, c BIGINT",
        "INSERT INTO out
         SELECT customer, CAST(window_start AS BIGINT), CAST(window_end AS BIGINT), COUNT(*)
         FROM TABLE(SESSION(TABLE orders PARTITION BY customer, DESCRIPTOR(ts), INTERVAL '2' SECOND))
         GROUP BY window_start, window_end, customer;",
        |orders| {
            let mut by_customer: BTreeMap<&str, Vec<i64>> = BTreeMap::new();
            for o in orders {
                by_customer.entry(o.customer).or_default().push(o.t_ms);
            }
            let mut rows = Vec::new();
            for (k, mut times) in by_customer {
                times.sort();
                let (mut start, mut end, mut count) = (times[0], times[0] + 2000, 0);
                for t in times {
                    if t > end {
                        rows.push(row![k, start, end, count]);
                        (start, count) = (t, 0);
                    }
                    end = end.max(t + 2000);
                    count += 1;
                }
                rows.push(row![k, start, end, count]);
            }
            rows
        },
    );
}

#[test]
fn union_all() {
    check_orders(
        "union",
        "id BIGINT, tag STRING",
        "INSERT INTO out
         SELECT id, 'low' FROM orders WHERE amount < 100
         UNION ALL
         SELECT id, 'high' FROM orders WHERE amount > 900;",
        |orders| {
            orders
                .iter()
                .filter_map(|o| match o.amount {
                    a if a < 100 => Some(row![o.id, "low"]),
                    a if a > 900 => Some(row![o.id, "high"]),
                    _ => None,
                })
                .collect()
        },
    );
}

#[test]
fn files_read_one_after_another_lose_no_rows_to_lateness() {
    // Two files cover the same hour; a reader that finished one file before starting
    // the next would turn the second file's rows late. Per-file watermarks prevent that.
    let scratch = Scratch::new("per-file");
    let data = orders(400);
    let (first, second) = data.split_at(200);
    let shifted: Vec<Order> = second
        .iter()
        .map(|o| Order {
            t_ms: o.t_ms - second[0].t_ms,
            ..o.clone()
        })
        .collect();
    let csv = |rows: &[Order]| {
        rows.iter()
            .map(|o| format!("{},{},{},{}\n", o.id, o.customer, o.amount, o.t_ms))
            .collect::<String>()
    };
    scratch.write("orders/a.csv", &csv(first));
    scratch.write("orders/b.csv", &csv(&shifted));
    let all: Vec<Order> = first.iter().cloned().chain(shifted).collect();
    let script = format!(
        "{}CREATE TABLE out (ws BIGINT, c BIGINT) WITH ('connector' = 'print');
         INSERT INTO out SELECT CAST(window_start AS BIGINT), COUNT(*)
         FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY window_start, window_end;",
        orders_table("0")
    )
    .replace("$DIR", &scratch.path().display().to_string());
    let expected = windowed(&all, |t| vec![(t / 10_000 * 10_000, 0)], false)
        .into_iter()
        .map(|((s, _, _), (c, _))| row![s, c])
        .collect();
    assert_result_in(&scratch, &script, expected);
}

#[test]
fn late_rows_are_dropped_and_counted() {
    let scratch = Scratch::new("late");
    // With no watermark delay and one row per chunk (the source emits a watermark after
    // each chunk), the row at 3 s arrives after the watermark reached 12 s: its window
    // [0, 10) has been emitted, so it is late.
    scratch.write(
        "orders/a.csv",
        "1,ann,10,1000\n2,ann,20,12000\n3,ann,30,3000\n4,ann,40,15000\n5,ann,50,25000\n",
    );
    let script = format!(
        "SET 'table.exec.mini-batch.size' = '1';\n{}CREATE TABLE out (ws BIGINT, c BIGINT, s BIGINT) WITH ('connector' = 'print');
         INSERT INTO out SELECT CAST(window_start AS BIGINT), COUNT(*), SUM(amount)
         FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY window_start, window_end;",
        orders_table("0")
    )
    .replace("$DIR", &scratch.path().display().to_string());
    // At parallelism 1 only: with more, the source subtasks that read no file hold the
    // watermark back until they end, so whether the row is late depends on timing.
    let file = scratch.write("late.sql", &script);
    let output = crate::support::eddy()
        .args(["run", "--metrics", "-p", "1"])
        .arg(&file)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let got = materialize(&parse_changes(&String::from_utf8_lossy(&output.stdout)));
    let want: BTreeMap<Vec<String>, usize> = [
        (row![0, 1, 10], 1),
        (row![10000, 2, 60], 1),
        (row![20000, 1, 50], 1),
    ]
    .into_iter()
    .collect();
    assert_eq!(got, want);
    let late: u64 = stderr
        .lines()
        .filter(|l| l.contains("WindowAggregate"))
        .filter_map(|l| l.split_whitespace().nth(3)?.parse::<u64>().ok())
        .sum();
    assert_eq!(late, 1, "late rows counted:\n{stderr}");
}

#[test]
fn upsert_sink_receives_no_update_before() {
    let scratch = Scratch::new("upsert");
    let data = orders(300);
    write_orders(&scratch, &data, 3);
    let script = format!(
        "{}CREATE TABLE out (customer STRING, c BIGINT, s BIGINT, PRIMARY KEY (customer) NOT ENFORCED) WITH ('connector' = 'print');
         SET 'table.exec.mini-batch.size' = '16';
         INSERT INTO out SELECT customer, COUNT(*), SUM(amount) FROM orders GROUP BY customer;",
        orders_table("1")
    )
    .replace("$DIR", &scratch.path().display().to_string());
    let explain = crate::support::eddy()
        .arg("explain")
        .arg(scratch.write("u.sql", &script))
        .output()
        .unwrap();
    let plan = String::from_utf8_lossy(&explain.stdout);
    assert!(plan.contains("changelog=upsert"), "{plan}");
    let expected: BTreeMap<Vec<String>, Vec<String>> = per_customer(&data, |_| true)
        .into_iter()
        .map(|(k, g)| (row![k], row![k, g.0, g.1]))
        .collect();
    for parallelism in [1, 4] {
        let output = run_script(&scratch, &script, parallelism);
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let changes = parse_changes(&String::from_utf8_lossy(&output.stdout));
        assert!(
            changes.iter().all(|c| c.op != "-U"),
            "an upsert stream must not carry -U"
        );
        assert!(changes.iter().any(|c| c.op == "+U"), "updates expected");
        assert_eq!(
            materialize_upsert(&changes, &[0]),
            expected,
            "at parallelism {parallelism}"
        );
    }
}

#[test]
fn json_source() {
    let scratch = Scratch::new("json");
    let text: String = (1..=50)
        .map(|i| {
            format!(
                "{{\"id\": {i}, \"tag\": \"t{}\", \"score\": {}.5}}\n",
                i % 4,
                i
            )
        })
        .collect();
    scratch.write("in/data.json", &text);
    let script = format!(
        "CREATE TABLE src (id BIGINT, tag STRING, score DOUBLE) WITH ('connector' = 'filesystem', 'path' = '{}/in', 'format' = 'json');
         CREATE TABLE out (tag STRING, c BIGINT, s DOUBLE) WITH ('connector' = 'print');
         INSERT INTO out SELECT tag, COUNT(*), SUM(score) FROM src GROUP BY tag;",
        scratch.path().display()
    );
    let expected = (0..4)
        .map(|t| {
            let ids: Vec<i64> = (1..=50).filter(|i| i % 4 == t).collect();
            row![
                format!("t{t}"),
                ids.len(),
                float(ids.iter().map(|i| *i as f64 + 0.5).sum())
            ]
        })
        .collect();
    assert_result_in(&scratch, &script, expected);
}

#[test]
fn datagen_sequence_grouped() {
    assert_result(
        "datagen",
        "CREATE TABLE seq (id BIGINT, bucket AS id % 10) WITH ('connector' = 'datagen',
           'fields.id.kind' = 'sequence', 'fields.id.start' = '1', 'fields.id.end' = '1000', 'rows-per-second' = '0');
         CREATE TABLE out (bucket BIGINT, c BIGINT, s BIGINT) WITH ('connector' = 'print');
         INSERT INTO out SELECT bucket, COUNT(*), SUM(id) FROM seq GROUP BY bucket;",
        (0..10)
            .map(|b| {
                let ids: Vec<i64> = (1..=1000).filter(|i| i % 10 == b).collect();
                row![b, ids.len(), ids.iter().sum::<i64>()]
            })
            .collect(),
    );
}

#[test]
fn nexmark_is_deterministic_across_parallelism() {
    // 10 000 events hold 9 200 bids (46 of every 50 events); per-auction counts must be
    // the same whatever the parallelism.
    let script = "CREATE TABLE bid (auction BIGINT, price BIGINT) WITH ('connector' = 'nexmark', 'nexmark.table' = 'bid', 'events.num' = '10000');
         CREATE TABLE out (auction BIGINT, c BIGINT, hi BIGINT) WITH ('connector' = 'print');
         INSERT INTO out SELECT auction, COUNT(*), MAX(price) FROM bid GROUP BY auction;";
    let scratch = Scratch::new("nexmark");
    let mut results = Vec::new();
    for parallelism in [1, 2, 4] {
        let output = run_script(&scratch, script, parallelism);
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        results.push(materialize(&parse_changes(&String::from_utf8_lossy(
            &output.stdout,
        ))));
    }
    let total: i64 = results[0]
        .keys()
        .map(|r| r[1].parse::<i64>().unwrap())
        .sum();
    assert_eq!(total, 9200);
    assert_eq!(results[0], results[1]);
    assert_eq!(results[0], results[2]);
}

#[test]
fn filesystem_sink_writes_the_rows() {
    let scratch = Scratch::new("fs-sink");
    let data = orders(200);
    write_orders(&scratch, &data, 2);
    let script = format!(
        "{}CREATE TABLE out (id BIGINT, customer STRING, amount BIGINT) WITH ('connector' = 'filesystem', 'path' = '$DIR/out', 'format' = 'csv');
         INSERT INTO out SELECT id, customer, amount FROM orders WHERE amount > 500;",
        orders_table("1")
    )
    .replace("$DIR", &scratch.path().display().to_string());
    let output = run_script(&scratch, &script, 2);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let mut got = Vec::new();
    for entry in std::fs::read_dir(scratch.path().join("out")).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        assert!(
            name.starts_with("part-") && name.ends_with(".csv"),
            "unexpected file {name}"
        );
        got.extend(
            std::fs::read_to_string(&path)
                .unwrap()
                .lines()
                .map(str::to_string),
        );
    }
    got.sort();
    let mut want: Vec<String> = data
        .iter()
        .filter(|o| o.amount > 500)
        .map(|o| format!("{},{},{}", o.id, o.customer, o.amount))
        .collect();
    want.sort();
    assert_eq!(got, want);
}

#[test]
fn malformed_records_fail_with_file_and_line_or_are_skipped() {
    let scratch = Scratch::new("malformed");
    scratch.write(
        "orders/a.csv",
        "1,ann,10,1000\n2,bob,oops,2000\n3,cid,30,3000\n",
    );
    let query = "CREATE TABLE out (id BIGINT, amount BIGINT) WITH ('connector' = 'print');
         INSERT INTO out SELECT id, amount FROM orders;";
    let strict = format!("{}{query}", orders_table("1"))
        .replace("$DIR", &scratch.path().display().to_string());
    let output = run_script(&scratch, &strict, 1);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(
        stderr.contains("orders/a.csv at line 2") && stderr.contains("oops"),
        "{stderr}"
    );
    let lenient = strict.replace(
        "'format' = 'csv'",
        "'format' = 'csv', 'format.ignore-parse-errors' = 'true'",
    );
    assert_result_in(&scratch, &lenient, vec![row![1, 10], row![3, 30]]);
}

/// Runs at parallelism 1 with one row per chunk; returns the printed changes.
fn exact_changes(scratch: &Scratch, rows: &str, query: &str) -> Vec<String> {
    scratch.write("orders/a.csv", rows);
    let script = format!(
        "SET 'table.exec.mini-batch.size' = '1';\n{}{query}",
        orders_table("1")
    )
    .replace("$DIR", &scratch.path().display().to_string());
    let output = run_script(scratch, &script, 1);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn group_by_changelog_sequence() {
    let scratch = Scratch::new("changelog");
    let got = exact_changes(
        &scratch,
        "1,ann,10,1000\n2,bob,5,2000\n3,ann,7,3000\n4,ann,1,4000\n",
        "CREATE TABLE out (customer STRING, c BIGINT, s BIGINT) WITH ('connector' = 'print');
         INSERT INTO out SELECT customer, COUNT(*), SUM(amount) FROM orders GROUP BY customer;",
    );
    assert_eq!(
        got,
        vec![
            "+I[ann, 1, 10]",
            "+I[bob, 1, 5]",
            "-U[ann, 1, 10]",
            "+U[ann, 2, 17]",
            "-U[ann, 2, 17]",
            "+U[ann, 3, 18]"
        ]
    );
}

#[test]
fn min_under_retraction_changelog_sequence() {
    // The inner GROUP BY retracts a customer's old count as it grows; the outer MIN must
    // fall back to the next smallest count when the smallest is retracted. By hand:
    // ann=1 gives +I[1]; bob=1 leaves the minimum at 1; ann 1->2 retracts one of the two
    // 1s, so still 1; bob 1->2 retracts the last 1, so -U[1] +U[2]; bob 2->3 leaves 2.
    let scratch = Scratch::new("min-changelog");
    let got = exact_changes(
        &scratch,
        "1,ann,1,1000\n2,bob,1,2000\n3,ann,1,3000\n4,bob,1,4000\n5,bob,1,5000\n",
        "CREATE TABLE out (lo BIGINT) WITH ('connector' = 'print');
         INSERT INTO out SELECT MIN(c) FROM (SELECT customer, COUNT(*) AS c FROM orders GROUP BY customer);",
    );
    assert_eq!(got, vec!["+I[1]", "-U[1]", "+U[2]"]);
}
