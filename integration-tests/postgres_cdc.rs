//! The postgres-cdc source against a real PostgreSQL (logical replication, pgoutput): a
//! table read while a writer changes it (transactions of several rows, some rolled back,
//! TOASTed values left unchanged by updates, keys changed), mirrored and aggregated into
//! PostgreSQL exactly once while TaskManagers, the JobManager and PostgreSQL itself are
//! killed or restarted, during the snapshot and during streaming; the slot's confirmed
//! position advancing on an idle table; the slot and publication kept by a stop with a
//! savepoint and gone after a cancel; and each defined refusal (replica identity, DDL,
//! TRUNCATE, a dropped publication, arrays).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::postgres::Postgres;
use crate::processes::{Cluster, submit_at};
use crate::recovery::{next, seeded, stop_with_savepoint};

const TWO_MINUTES: Duration = Duration::from_secs(120);

/// The watched table, its initial rows (every 20th with a large note PostgreSQL keeps
/// TOASTed), and the sinks' tables.
pub fn prepare(pg: &Postgres, initial: u64, identity: &str) {
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
pub fn job(pg: &Postgres, slot: &str, mode: &str, extra: &str) -> String {
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
pub struct Writer {
    stop: Arc<AtomicBool>,
    changes: Arc<AtomicU64>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Writer {
    pub fn start(pg: &Postgres, mut rng: u64, first_id: u64, toast: bool) -> Writer {
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
                    let rollback = next(&mut rng).is_multiple_of(10);
                    script.push_str("BEGIN;\n");
                    for _ in 0..1 + next(&mut rng) % 6 {
                        let id = 1 + next(&mut rng) % next_id;
                        let statement = match next(&mut rng) % 10 {
                            0..=3 => {
                                next_id += 1;
                                let note = match next_id % 20 {
                                    0 if toast => format!(
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
    pub fn stop(mut self) -> u64 {
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

/// Waits until the mirror and the totals equal the source and its totals; returns the
/// rows checked, or what still differs when `within` has passed.
pub fn convergence(pg: &Postgres, within: Duration) -> Result<usize, String> {
    let deadline = Instant::now() + within;
    loop {
        let (source, mirror) = (rows_of(pg, "orders"), rows_of(pg, "mirror"));
        let (expected, totals) = (expected_totals(pg), totals_of(pg));
        if source == mirror && expected == totals {
            return Ok(source.len() + totals.len());
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
            let wrong_totals: Vec<String> = expected
                .iter()
                .filter(|r| !totals.contains(r))
                .take(5)
                .map(|r| {
                    let got = totals.iter().find(|t| t.first() == r.first());
                    format!("{} expected, {got:?} written", r.join(","))
                })
                .collect();
            return Err(format!(
                "source {} rows, mirror {}; missing {missing:?}, extra {extra:?}; totals: \
                 {} expected, {} written, differing: {wrong_totals:?}",
                source.len(),
                mirror.len(),
                expected.len(),
                totals.len()
            ));
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// [`convergence`], or a failed test.
fn assert_converges(pg: &Postgres, within: Duration) {
    match convergence(pg, within) {
        Ok(rows) => eprintln!("converged: {rows} rows and totals checked"),
        Err(difference) => panic!("no convergence: {difference}"),
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
pub fn cancel_and_assert_released(cluster: &Cluster, job: &str, pg: &Postgres, slots: &[&str]) {
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
    let writer = Writer::start(&pg, next(&mut rng), initial, true);

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

/// A stop with a savepoint keeps the slots and publications (only a cancel frees them):
/// the job resumed from the savepoint reads every change made while it was stopped,
/// exactly once, into the same sinks.
#[test]
fn a_job_stopped_with_a_savepoint_keeps_its_slots_and_resumes_exactly() {
    let pg = Postgres::start("cdc-stop");
    let initial = 3_000;
    prepare(&pg, initial, "FULL");
    let mut rng = seeded();
    let cluster = Cluster::start("postgres-cdc-stop", 1, 4);
    let script = job(&pg, "eddy_stop", "all", "");
    let job_id = cluster.submit(&script, 2);
    cluster.wait_for(&job_id, "RUNNING", TWO_MINUTES);
    let writer = Writer::start(&pg, next(&mut rng), initial, true);
    std::thread::sleep(Duration::from_millis(2000 + next(&mut rng) % 2000));
    let savepoint = stop_with_savepoint(&cluster, &job_id, 1);
    // Longer than a cancel's release takes; the writer goes on meanwhile.
    std::thread::sleep(Duration::from_secs(4));
    let slots = ["eddy_stop_m", "eddy_stop_t"];
    for slot in slots {
        assert_eq!(slot_row(&pg, slot).len(), 1, "slot {slot} kept at the stop");
        let publication = pg.query(&format!(
            "SELECT pubname FROM pg_publication WHERE pubname = '{slot}'"
        ));
        assert_eq!(publication.len(), 1, "publication {slot} kept at the stop");
    }
    let resumed = submit_at(
        &cluster.address,
        &cluster.scratch,
        &script,
        &["--from-savepoint", &savepoint],
    )
    .unwrap_or_else(|e| panic!("resuming from {savepoint} failed: {e}"));
    cluster.wait_for(&resumed, "RUNNING", TWO_MINUTES);
    std::thread::sleep(Duration::from_secs(2));
    let changes = writer.stop();
    assert!(changes > 20, "the writer made changes: {changes}");
    assert_converges(&pg, Duration::from_secs(120));
    cancel_and_assert_released(&cluster, &resumed, &pg, &slots);
}

/// A job that makes its publication, on a slot that exists, under `synchronous_commit =
/// off` (a commit stays in the WAL buffers for up to `wal_writer_delay`): the slot is
/// moved past the publication's commit, whose WAL must be written out for pgoutput to
/// find it; a change committed before, and seen by the snapshot, is counted once.
#[test]
fn a_publication_made_under_asynchronous_commit_is_found_by_the_stream() {
    let pg = Postgres::start_with("cdc-unwritten", "-c wal_writer_delay=10000");
    prepare(&pg, 2000, "FULL");
    // No WAL from the sink, so that nothing but the statement below writes the WAL out.
    pg.execute("ALTER TABLE totals SET UNLOGGED");
    // An existing slot (its creation wrote the WAL out), moved to the present on start.
    pg.execute("SELECT pg_create_logical_replication_slot('eddy_unwritten', 'pgoutput')");
    pg.execute("INSERT INTO orders VALUES (9001, 5, 7.25, 'unwritten', now())");
    let unwritten = &pg.query("SELECT pg_current_wal_lsn() < pg_current_wal_insert_lsn()")[0][0];
    assert_eq!(
        unwritten, "t",
        "the insert's commit was written out at once"
    );

    let cluster = Cluster::start("postgres-cdc-unwritten", 1, 1);
    let script = format!(
        "SET 'execution.checkpointing.interval' = '300ms';
         SET 'restart-strategy.type' = 'none';
         {}
         CREATE TABLE totals (customer INT, total DECIMAL(38, 2), n BIGINT,
           PRIMARY KEY (customer) NOT ENFORCED)
         WITH ('connector' = 'postgres', 'url' = '{}', 'table' = 'totals',
           'sink.delivery-guarantee' = 'at-least-once');
         INSERT INTO totals SELECT customer, SUM(amount), COUNT(*) FROM orders_t
           GROUP BY customer;",
        cdc_table(&pg, "orders_t", "eddy_unwritten", "all", ""),
        pg.url()
    );
    let job_id = cluster.submit(&script, 1);
    cluster.wait_for(&job_id, "RUNNING", TWO_MINUTES);
    let deadline = Instant::now() + TWO_MINUTES;
    while totals_of(&pg) != expected_totals(&pg) {
        assert!(Instant::now() < deadline, "the snapshot is not aggregated");
        std::thread::sleep(Duration::from_millis(200));
    }
    // A synchronous commit writes out the WAL before it, the first insert's commit too: the
    // stream brings both, in that order.
    pg.execute(
        "SET synchronous_commit = on;
         INSERT INTO orders VALUES (9002, 36, 1.00, 'written', now());",
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (expected, totals) = (expected_totals(&pg), totals_of(&pg));
        if totals == expected {
            break;
        }
        let differing: Vec<_> = totals.iter().filter(|t| !expected.contains(t)).collect();
        assert!(
            Instant::now() < deadline,
            "totals {differing:?} differ from the table's {expected:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let status = cluster.status(&job_id);
    assert_eq!(status["state"], "RUNNING", "{status}");
}

/// A small table `name` with a TOASTed note, and a job reading it (through slot `name`)
/// into a blackhole, with no restarts: a failure ends the job.
fn small_job(pg: &Postgres, name: &str, mode: &str) -> String {
    pg.execute(&format!(
        "CREATE TABLE {name} (id BIGINT PRIMARY KEY, note TEXT);
         INSERT INTO {name} SELECT g, CASE WHEN g = 1 THEN (SELECT string_agg(md5(s::text), '')
           FROM generate_series(1, 300) s) ELSE 'n' END FROM generate_series(1, 100) g;"
    ));
    format!(
        "SET 'execution.checkpointing.interval' = '300ms';
         SET 'restart-strategy.type' = 'none';
         CREATE TABLE src (id BIGINT, note STRING, PRIMARY KEY (id) NOT ENFORCED)
         WITH ('connector' = 'postgres-cdc', 'hostname' = '127.0.0.1', 'port' = '{}',
           'username' = 'postgres', 'database-name' = 'postgres', 'table-name' = '{name}',
           'slot.name' = '{name}', 'changelog-mode' = '{mode}');
         CREATE TABLE sink (id BIGINT, note STRING) WITH ('connector' = 'blackhole');
         INSERT INTO sink SELECT * FROM src;",
        pg.port()
    )
}

/// Runs `script`, does `action` once it streams, and expects the job to fail with a task
/// error saying `expected` (in the TaskManagers' logs: the job's reason names the first
/// failure reported, which may be a downstream task's lost input).
fn fails_with(cluster: &Cluster, script: &str, action: impl FnOnce(), expected: &str) {
    let job = cluster.submit(script, 1);
    let deadline = Instant::now() + TWO_MINUTES;
    let mut acted = Some(action);
    let mut running_since = None;
    loop {
        let status = cluster.status(&job);
        match status["state"].as_str().unwrap_or_default() {
            "FAILED" => break,
            "RUNNING" => {
                let since = *running_since.get_or_insert_with(Instant::now);
                if since.elapsed() > Duration::from_secs(2)
                    && let Some(action) = acted.take()
                {
                    action();
                }
            }
            _ => {}
        }
        assert!(Instant::now() < deadline, "the job did not fail: {status}");
        std::thread::sleep(Duration::from_millis(100));
    }
    // The TaskManagers log into files (EDDY_TEST_STDERR_DIR).
    let deadline = Instant::now() + Duration::from_secs(10);
    while !cluster
        .taskmanagers
        .iter()
        .filter_map(|tm| tm.log.as_ref())
        .filter_map(|log| std::fs::read_to_string(log).ok())
        .any(|text| {
            text.lines()
                .any(|l| l.contains(&job) && l.contains(expected))
        })
    {
        assert!(
            Instant::now() < deadline,
            "expected a task of job {job} to fail with '{expected}'"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    eprintln!("failed as defined: {expected}");
}

#[test]
fn upserts_from_the_default_identity_and_every_defined_refusal() {
    let pg = Postgres::start("cdc-edges");
    let initial = 3_000;
    prepare(&pg, initial, "DEFAULT");
    // Short notes only: with the default identity, PostgreSQL does not send a TOASTed
    // value an update leaves unchanged (refused below).
    pg.execute("UPDATE orders SET note = 'short' || id");
    let logs = std::env::temp_dir().join(format!("eddy-cdc-edges-{}", std::process::id()));
    let logs = logs.display().to_string();
    let cluster = Cluster::start_with(
        "postgres-cdc-edges",
        2,
        2,
        &[],
        &[("EDDY_TEST_STDERR_DIR", logs.as_str())],
    );

    // 'all' needs whole before-images.
    let script = format!(
        "SET 'restart-strategy.type' = 'none'; {}",
        job(&pg, "eddy_all", "all", "")
    );
    fails_with(&cluster, &script, || {}, "REPLICA IDENTITY DEFAULT");

    // An existing, idle pgoutput slot is used (moved past the changes made before its
    // publication existed, which pgoutput cannot decode); one of another plugin is refused.
    pg.execute("SELECT pg_create_logical_replication_slot('eddy_up_m', 'pgoutput')");
    pg.execute("INSERT INTO other VALUES (1)");
    pg.execute("SELECT pg_create_logical_replication_slot('eddy_decoding_m', 'test_decoding')");
    let script = format!(
        "SET 'restart-strategy.type' = 'none'; {}",
        job(&pg, "eddy_decoding", "upsert", "")
    );
    fails_with(&cluster, &script, || {}, "not a pgoutput slot");
    pg.execute("SELECT pg_drop_replication_slot('eddy_decoding_m')");

    // Upserts by key, normalized by Eddy: exact through a TaskManager kill.
    let mut rng = seeded();
    let mut cluster = cluster;
    let job_id = cluster.submit(&job(&pg, "eddy_up", "upsert", ""), 2);
    cluster.wait_for(&job_id, "RUNNING", TWO_MINUTES);
    let writer = Writer::start(&pg, next(&mut rng), initial, false);
    std::thread::sleep(Duration::from_secs(3));
    kill_a_taskmanager(&mut cluster, &mut rng, "upsert mode, streaming");
    std::thread::sleep(Duration::from_secs(3));
    let changes = writer.stop();
    assert!(changes > 100, "the writer made changes: {changes}");
    assert_converges(&pg, Duration::from_secs(120));
    cancel_and_assert_released(&cluster, &job_id, &pg, &["eddy_up_m", "eddy_up_t"]);

    // Each change the changelog cannot follow ends the job with its reason.
    let port = pg.port();
    let run = move |sql: &'static str| move || assert!(crate::postgres::run_script_at(port, sql));
    fails_with(
        &cluster,
        &small_job(&pg, "cdc_toast", "upsert"),
        run("UPDATE cdc_toast SET id = id WHERE id = 1"),
        "column 'note' (a large, TOASTed value) unchanged",
    );
    fails_with(
        &cluster,
        &small_job(&pg, "cdc_truncate", "upsert"),
        run("TRUNCATE cdc_truncate"),
        "the table was truncated",
    );
    fails_with(
        &cluster,
        &small_job(&pg, "cdc_ddl", "upsert"),
        run("ALTER TABLE cdc_ddl DROP COLUMN note; INSERT INTO cdc_ddl VALUES (1000);"),
        "column 'note' was dropped or renamed",
    );
    fails_with(
        &cluster,
        &small_job(&pg, "cdc_publication", "upsert"),
        run("DROP PUBLICATION cdc_publication; INSERT INTO cdc_publication VALUES (1000, 'x');"),
        "publication",
    );
    pg.execute("CREATE TABLE cdc_array (id BIGINT PRIMARY KEY, note INT[])");
    let script = small_job(&pg, "cdc_array_unused", "upsert").replace(
        "'table-name' = 'cdc_array_unused'",
        "'table-name' = 'cdc_array'",
    );
    fails_with(&cluster, &script, || {}, "is an array (integer[])");
    let _ = std::fs::remove_dir_all(&logs);
}

/// `examples/postgres_cdc.sql` on the embedded cluster keeps `customer_totals` equal to
/// the same query on `orders` through inserts, updates and deletes, and stops on Ctrl-C.
#[test]
fn the_worked_example_keeps_per_customer_totals() {
    let pg = Postgres::start("cdc-example");
    pg.execute(
        "CREATE TABLE orders (id BIGINT PRIMARY KEY, customer INT, amount NUMERIC(12, 2));
         ALTER TABLE orders REPLICA IDENTITY FULL;
         CREATE TABLE customer_totals (customer INT PRIMARY KEY, total NUMERIC(38, 2),
           orders BIGINT);
         INSERT INTO orders SELECT g, g % 7, g * 1.25 FROM generate_series(1, 500) g;",
    );
    let example = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/postgres_cdc.sql"),
    )
    .unwrap()
    .replace("5432", &pg.port().to_string());
    let scratch = crate::support::Scratch::new("cdc-example");
    let script = scratch.path().join("postgres_cdc.sql");
    std::fs::write(&script, example).unwrap();
    let mut run = crate::support::eddy()
        .arg("run")
        .arg(&script)
        .env("PG_PASSWORD", "unused")
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let expected = |pg: &Postgres| {
        pg.query("SELECT customer, sum(amount), count(*) FROM orders GROUP BY customer ORDER BY 1")
    };
    let totals =
        |pg: &Postgres| pg.query("SELECT customer, total, orders FROM customer_totals ORDER BY 1");
    let converge = |pg: &Postgres| {
        let deadline = Instant::now() + TWO_MINUTES;
        while totals(pg) != expected(pg) {
            assert!(
                Instant::now() < deadline,
                "{:?} vs {:?}",
                totals(pg),
                expected(pg)
            );
            std::thread::sleep(Duration::from_millis(300));
        }
    };
    converge(&pg);
    pg.execute(
        "BEGIN; UPDATE orders SET amount = amount * 2 WHERE customer = 3;
           DELETE FROM orders WHERE customer = 5; INSERT INTO orders VALUES (1000, 9, 1); COMMIT;",
    );
    converge(&pg);
    assert_eq!(totals(&pg).len(), 7, "customer 5 is gone, customer 9 came");
    crate::processes::signal(run.id(), "INT");
    let status = run.wait().unwrap();
    assert!(status.success(), "Ctrl-C stops the example: {status}");
    let slots = pg.query("SELECT slot_name FROM pg_replication_slots");
    assert_eq!(
        slots,
        [["eddy_orders"]],
        "a stopped job keeps its slot to resume"
    );
}

/// Flink CDC's metadata columns: the names of the table, schema and database, the change's
/// kind, and its commit time (0 for rows of the snapshot).
#[test]
fn metadata_columns_name_the_table_and_time_each_change() {
    let pg = Postgres::start("cdc-metadata");
    pg.execute(
        "CREATE TABLE meta (id BIGINT PRIMARY KEY, v INT);
         ALTER TABLE meta REPLICA IDENTITY FULL;
         INSERT INTO meta VALUES (1, 10), (2, 20);",
    );
    let cluster = Cluster::start("postgres-cdc-metadata", 1, 1);
    let script = format!(
        "SET 'execution.checkpointing.interval' = '300ms';
         CREATE TABLE src (id BIGINT, v INT,
           kind STRING METADATA FROM 'row_kind' VIRTUAL,
           tbl STRING METADATA FROM 'table_name' VIRTUAL,
           sch STRING METADATA FROM 'schema_name' VIRTUAL,
           db STRING METADATA FROM 'database_name' VIRTUAL,
           ts TIMESTAMP_LTZ(3) METADATA FROM 'op_ts' VIRTUAL,
           PRIMARY KEY (id) NOT ENFORCED)
         WITH ('connector' = 'postgres-cdc', 'hostname' = '127.0.0.1', 'port' = '{}',
           'username' = 'postgres', 'database-name' = 'postgres', 'table-name' = 'meta',
           'slot.name' = 'meta');
         CREATE TABLE out (id BIGINT, v INT, kind STRING, tbl STRING, sch STRING, db STRING,
           year BIGINT) WITH ('connector' = 'print');
         INSERT INTO out SELECT id, v, kind, tbl, sch, db, EXTRACT(YEAR FROM ts) FROM src;",
        pg.port()
    );
    let job = cluster.submit(&script, 1);
    cluster.wait_for(&job, "RUNNING", TWO_MINUTES);
    let deadline = Instant::now() + TWO_MINUTES;
    while cluster.printed().lines().count() < 2 {
        assert!(
            Instant::now() < deadline,
            "no snapshot rows: {}",
            cluster.printed()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    pg.execute("UPDATE meta SET v = 21 WHERE id = 2; DELETE FROM meta WHERE id = 1;");
    let year = pg.query("SELECT extract(year FROM now())::int")[0][0].clone();
    let expected = [
        "+I[1, 10, +I, meta, public, postgres, 1970]".to_string(),
        "+I[2, 20, +I, meta, public, postgres, 1970]".to_string(),
        format!("-U[2, 20, -U, meta, public, postgres, {year}]"),
        format!("+U[2, 21, +U, meta, public, postgres, {year}]"),
        format!("-D[1, 10, -D, meta, public, postgres, {year}]"),
    ];
    while cluster.printed().lines().count() < expected.len() {
        assert!(
            Instant::now() < deadline,
            "changes missing: {}",
            cluster.printed()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let mut printed: Vec<String> = cluster.printed().lines().map(str::to_string).collect();
    printed[..2].sort();
    assert_eq!(printed, expected);
    cancel_and_assert_released(&cluster, &job, &pg, &["meta"]);
}
