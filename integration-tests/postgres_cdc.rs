//! The postgres-cdc source against a real PostgreSQL (logical replication, pgoutput): a
//! table read while a writer changes it (transactions of several rows, some rolled back,
//! TOASTed values left unchanged by updates, keys changed), mirrored and aggregated into
//! PostgreSQL exactly once while TaskManagers, the JobManager and PostgreSQL itself are
//! killed or restarted, during the snapshot and during streaming; the slot's confirmed
//! position advancing on an idle table; the slot and publication gone after a cancel; and
//! each defined refusal (replica identity, DDL, TRUNCATE, a dropped publication, arrays).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::postgres::Postgres;
use crate::processes::Cluster;
use crate::recovery::{next, seeded};

const TWO_MINUTES: Duration = Duration::from_secs(120);

/// The watched table, its initial rows (every 20th with a large note PostgreSQL keeps
/// TOASTed), and the sinks' tables.
fn prepare(pg: &Postgres, initial: u64, identity: &str) {
    pg.execute(&format!(
        "CREATE TABLE orders (id BIGINT PRIMARY KEY, customer INT NOT NULL,
           amount NUMERIC(12, 2) NOT NULL, note TEXT, at TIMESTAMPTZ NOT NULL);
         ALTER TABLE orders REPLICA IDENTITY {identity};
         INSERT INTO orders SELECT g, g % 37, (g % 1000) / 4.0,
           CASE WHEN g % 20 = 0 THEN (SELECT string_agg(md5(g::text || s::text), '')
             FROM generate_series(1, 300) s) ELSE 'n' || g END,
           TIMESTAMPTZ '2026-01-01 00:00:00+00' + g * INTERVAL '1 second'
         FROM generate_series(1, {initial}) g;
         CREATE TABLE mirror (id BIGINT PRIMARY KEY, customer INT, amount NUMERIC(12, 2),
           note TEXT, at TIMESTAMPTZ);
         CREATE TABLE totals (customer INT PRIMARY KEY, total NUMERIC(38, 2), n BIGINT);
         CREATE TABLE other (x INT);"
    ));
}

/// `orders` as a postgres-cdc table named `name`, read through slot `slot`.
fn cdc_table(pg: &Postgres, name: &str, slot: &str, mode: &str, extra: &str) -> String {
    format!(
        "CREATE TABLE {name} (id BIGINT, customer INT, amount DECIMAL(12, 2), note STRING,
           at TIMESTAMP_LTZ(6), PRIMARY KEY (id) NOT ENFORCED)
         WITH ('connector' = 'postgres-cdc', 'hostname' = '127.0.0.1', 'port' = '{}',
           'username' = 'postgres', 'database-name' = 'postgres',
           'schema-name' = 'public', 'table-name' = 'orders', 'slot.name' = '{slot}',
           'decoding.plugin.name' = 'pgoutput', 'changelog-mode' = '{mode}',
           'scan.incremental.snapshot.chunk.size' = '700'{extra});",
        pg.port()
    )
}

/// The Eddy job: the table's mirror (read through slot `{slot}_m`), and its per-customer
/// totals (through `{slot}_t`: a slot has one reader, and each INSERT scans on its own).
fn job(pg: &Postgres, slot: &str, mode: &str, extra: &str) -> String {
    let url = pg.url();
    format!(
        "SET 'execution.checkpointing.interval' = '500ms';
         SET 'restart-strategy.exponential-delay.initial-backoff' = '200ms';
         SET 'restart-strategy.exponential-delay.max-backoff' = '1s';
         {}
         {}
         CREATE TABLE mirror (id BIGINT, customer INT, amount DECIMAL(12, 2), note STRING,
           at TIMESTAMP_LTZ(6), PRIMARY KEY (id) NOT ENFORCED)
         WITH ('connector' = 'postgres', 'url' = '{url}', 'table' = 'mirror',
           'sink.delivery-guarantee' = 'exactly-once');
         CREATE TABLE totals (customer INT, total DECIMAL(38, 2), n BIGINT,
           PRIMARY KEY (customer) NOT ENFORCED)
         WITH ('connector' = 'postgres', 'url' = '{url}', 'table' = 'totals',
           'sink.delivery-guarantee' = 'exactly-once');
         INSERT INTO mirror SELECT * FROM orders_m;
         INSERT INTO totals SELECT customer, SUM(amount), COUNT(*) FROM orders_t
           GROUP BY customer;",
        cdc_table(pg, "orders_m", &format!("{slot}_m"), mode, extra),
        cdc_table(pg, "orders_t", &format!("{slot}_t"), mode, extra),
    )
}

/// A writer changing `orders` until told to stop: transactions of 1 to 6 statements —
/// inserts (some with TOASTed notes), updates of amounts (leaving notes unchanged), of
/// customers and of keys, deletes — a tenth of them rolled back. Batches run as psql
/// sessions; one failing (PostgreSQL restarting) is simply followed by the next.
struct Writer {
    stop: Arc<AtomicBool>,
    changes: Arc<AtomicU64>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Writer {
    fn start(pg: &Postgres, mut rng: u64, first_id: u64) -> Writer {
        let stop = Arc::new(AtomicBool::new(false));
        let changes = Arc::new(AtomicU64::new(0));
        let port = pg.port();
        let (stop_flag, counter) = (stop.clone(), changes.clone());
        let thread = std::thread::spawn(move || {
            let mut next_id = first_id;
            while !stop_flag.load(Ordering::SeqCst) {
                let mut script = String::new();
                let mut statements = 0;
                for _ in 0..40 {
                    let rollback = next(&mut rng) % 10 == 0;
                    script.push_str("BEGIN;\n");
                    for _ in 0..1 + next(&mut rng) % 6 {
                        let id = 1 + next(&mut rng) % next_id;
                        let statement = match next(&mut rng) % 10 {
                            0..=3 => {
                                next_id += 1;
                                let note = match next_id % 20 {
                                    0 => format!(
                                        "(SELECT string_agg(md5('{next_id}' || s::text), '') \
                                         FROM generate_series(1, 300) s)"
                                    ),
                                    _ => format!("'w{next_id}'"),
                                };
                                format!(
                                    "INSERT INTO orders VALUES ({next_id}, {}, {}.25, {note}, \
                                     now());",
                                    next(&mut rng) % 37,
                                    next(&mut rng) % 500
                                )
                            }
                            4..=5 => {
                                format!("UPDATE orders SET amount = amount + 1.5 WHERE id = {id};")
                            }
                            6 => format!(
                                "UPDATE orders SET customer = (customer + 1) % 37 WHERE id = {id};"
                            ),
                            7 => {
                                next_id += 1;
                                format!("UPDATE orders SET id = {next_id} WHERE id = {id};")
                            }
                            _ => format!("DELETE FROM orders WHERE id = {id};"),
                        };
                        script.push_str(&statement);
                        script.push('\n');
                        statements += 1;
                    }
                    script.push_str(if rollback { "ROLLBACK;\n" } else { "COMMIT;\n" });
                }
                if crate::postgres::run_script_at(port, &script) {
                    counter.fetch_add(statements, Ordering::SeqCst);
                } else {
                    std::thread::sleep(Duration::from_millis(200));
                }
            }
        });
        Writer {
            stop,
            changes,
            thread: Some(thread),
        }
    }

    /// Stops the writer; returns how many statements it ran.
    fn stop(mut self) -> u64 {
        self.stop.store(true, Ordering::SeqCst);
        self.thread.take().unwrap().join().unwrap();
        self.changes.load(Ordering::SeqCst)
    }
}

/// The table's rows as comparable lines (long notes by their digest).
fn rows_of(pg: &Postgres, table: &str) -> Vec<Vec<String>> {
    pg.query(&format!(
        "SELECT id, customer, amount, md5(note), extract(epoch FROM at) FROM {table} ORDER BY id"
    ))
}

/// Totals computed from the source table.
fn expected_totals(pg: &Postgres) -> Vec<Vec<String>> {
    pg.query(
        "SELECT customer, sum(amount), count(*) FROM orders GROUP BY customer ORDER BY customer",
    )
}

fn totals_of(pg: &Postgres) -> Vec<Vec<String>> {
    pg.query("SELECT customer, total, n FROM totals ORDER BY customer")
}

/// Waits until the mirror and the totals equal the source and its totals.
fn assert_converges(pg: &Postgres, within: Duration) {
    let deadline = Instant::now() + within;
    loop {
        let (source, mirror) = (rows_of(pg, "orders"), rows_of(pg, "mirror"));
        let (expected, totals) = (expected_totals(pg), totals_of(pg));
        if source == mirror && expected == totals {
            eprintln!(
                "converged: {} rows, {} customers",
                source.len(),
                totals.len()
            );
            return;
        }
        if Instant::now() > deadline {
            let missing: Vec<_> = source
                .iter()
                .filter(|r| !mirror.contains(r))
                .take(5)
                .collect();
            let extra: Vec<_> = mirror
                .iter()
                .filter(|r| !source.contains(r))
                .take(5)
                .collect();
            panic!(
                "no convergence: source {} rows, mirror {}; missing {missing:?}, extra \
                 {extra:?}; totals equal: {}",
                source.len(),
                mirror.len(),
                expected == totals
            );
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

fn slot_row(pg: &Postgres, slot: &str) -> Vec<Vec<String>> {
    pg.query(&format!(
        "SELECT confirmed_flush_lsn, active FROM pg_replication_slots WHERE slot_name = '{slot}'"
    ))
}

/// LSN text `X/Y` as a number.
fn lsn(text: &str) -> u64 {
    let (high, low) = text.split_once('/').unwrap();
    (u64::from_str_radix(high, 16).unwrap() << 32) | u64::from_str_radix(low, 16).unwrap()
}

/// The slot's confirmed position reaches the WAL's end while the watched table is idle.
fn assert_confirmed_flush_advances_while_idle(pg: &Postgres, slot: &str) {
    let before = lsn(&slot_row(pg, slot)[0][0]);
    pg.execute("INSERT INTO other SELECT generate_series(1, 1000)");
    let target = lsn(&pg.query("SELECT pg_current_wal_lsn()")[0][0]);
    assert!(target > before);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let confirmed = lsn(&slot_row(pg, slot)[0][0]);
        if confirmed >= target {
            eprintln!("idle table: confirmed_flush_lsn {before:#x} -> {confirmed:#x}");
            return;
        }
        assert!(
            Instant::now() < deadline,
            "confirmed_flush_lsn stayed at {confirmed:#x} below {target:#x} on an idle table"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// Cancels the job and waits until its slots and publications are gone.
fn cancel_and_assert_released(cluster: &Cluster, job: &str, pg: &Postgres, slots: &[&str]) {
    let output = cluster.client(&["cancel", job]);
    assert!(output.status.success(), "{output:?}");
    let deadline = Instant::now() + Duration::from_secs(60);
    let names = slots
        .iter()
        .map(|s| format!("'{s}'"))
        .collect::<Vec<_>>()
        .join(", ");
    loop {
        let slots = pg.query(&format!(
            "SELECT slot_name FROM pg_replication_slots WHERE slot_name IN ({names})"
        ));
        let publications = pg.query(&format!(
            "SELECT pubname FROM pg_publication WHERE pubname IN ({names})"
        ));
        if slots.is_empty() && publications.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "after cancel: slot {slots:?}, publication {publications:?}"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// Kills a random TaskManager and starts a replacement.
fn kill_a_taskmanager(cluster: &mut Cluster, rng: &mut u64, when: &str) {
    let alive: Vec<usize> = (0..cluster.taskmanagers.len())
        .filter(|i| cluster.taskmanagers[*i].child.try_wait().unwrap().is_none())
        .collect();
    let victim = alive[(next(rng) as usize) % alive.len()];
    eprintln!("SIGKILL TaskManager {} ({when})", victim + 1);
    cluster.taskmanagers[victim].child.kill().unwrap();
    cluster.add_taskmanager(2);
}

#[test]
fn a_changing_table_is_mirrored_and_aggregated_exactly_through_kills() {
    let pg = Postgres::start("cdc");
    let initial = 60_000;
    prepare(&pg, initial, "FULL");
    let mut rng = seeded();
    let mut cluster = Cluster::start("postgres-cdc", 2, 2);
    let job_id = cluster.submit(&job(&pg, "eddy_cdc", "all", ""), 2);
    cluster.wait_for(&job_id, "RUNNING", TWO_MINUTES);
    let writer = Writer::start(&pg, next(&mut rng), initial);

    // During the snapshot (60 000 rows in chunks of 700, behind exactly-once sinks).
    std::thread::sleep(Duration::from_millis(400 + next(&mut rng) % 800));
    let mirrored = pg.query("SELECT count(*) FROM mirror")[0][0].clone();
    kill_a_taskmanager(
        &mut cluster,
        &mut rng,
        &format!("snapshot: {mirrored} rows mirrored"),
    );
    std::thread::sleep(Duration::from_millis(1500 + next(&mut rng) % 1500));
    let mirrored = pg.query("SELECT count(*) FROM mirror")[0][0].clone();
    kill_a_taskmanager(&mut cluster, &mut rng, &format!("{mirrored} rows mirrored"));

    // Streaming: wait until the snapshot is through, then kill again.
    let deadline = Instant::now() + TWO_MINUTES;
    while pg.query("SELECT count(*) FROM mirror")[0][0]
        .parse::<u64>()
        .unwrap()
        < initial / 2
    {
        assert!(Instant::now() < deadline, "the snapshot is not read");
        std::thread::sleep(Duration::from_millis(300));
    }
    std::thread::sleep(Duration::from_secs(4));
    kill_a_taskmanager(&mut cluster, &mut rng, "streaming");
    std::thread::sleep(Duration::from_millis(2000 + next(&mut rng) % 2000));
    eprintln!("SIGKILL the JobManager (streaming)");
    cluster.restart_jobmanager();
    std::thread::sleep(Duration::from_millis(3000 + next(&mut rng) % 2000));
    eprintln!("restart PostgreSQL (streaming)");
    pg.restart();
    std::thread::sleep(Duration::from_millis(3000 + next(&mut rng) % 2000));
    kill_a_taskmanager(
        &mut cluster,
        &mut rng,
        "streaming, after PostgreSQL's restart",
    );
    std::thread::sleep(Duration::from_secs(3));
    let changes = writer.stop();
    eprintln!("the writer ran {changes} statements");
    assert!(changes > 1000, "the writer made changes: {changes}");

    assert_converges(&pg, Duration::from_secs(180));
    let status = cluster.status(&job_id);
    assert!(status["restarts"].as_u64().unwrap() >= 4, "{status}");
    assert_confirmed_flush_advances_while_idle(&pg, "eddy_cdc_m");
    assert_confirmed_flush_advances_while_idle(&pg, "eddy_cdc_t");
    cancel_and_assert_released(&cluster, &job_id, &pg, &["eddy_cdc_m", "eddy_cdc_t"]);
}
