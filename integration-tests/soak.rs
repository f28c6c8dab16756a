//! The chaos soak: `bench/chaos-soak.sh [KILLS] [RUNS]` (ignored in the test suite, it
//! takes minutes a run). A JobManager and three TaskManagers as real processes run an
//! exactly-once job into PostgreSQL (upserts of two retracting aggregates, appends), files
//! on S3, a Kafka topic, and 2-second tumbling windows into local files, while processes
//! fail: TaskManagers SIGKILLed and replaced, the JobManager SIGKILLed and restarted on the
//! same port and storage (a third of the kills at least), TaskManagers cut off from the
//! cluster (SIGSTOPped past the heartbeat timeout, then let go on), and replacements
//! started with failpoints that abort them at the protocol's most delicate moments; and
//! (unless `EDDY_SOAK_EXTERNAL=0`) as many faults of the external systems: PostgreSQL
//! restarted or its sessions ended mid-commit, the broker frozen past its clients' request
//! timeouts (restarted instead with `EDDY_SOAK_BROKER_RESTARTS=1`: the test broker loses
//! transactions across restarts, see `kafka::Broker::restart`), S3 (behind a
//! fault-injecting proxy) answering 503s or hanging. What
//! readers see at the end must equal a failure-free run of the same job exactly, with no
//! transaction left prepared and no file left hidden. Beside it, a postgres-cdc job
//! mirrors and aggregates a table a writer keeps changing (`postgres_cdc::job`), through
//! the same failures: its mirror must equal the table and its totals the same query on it.
//!
//! With `EDDY_SOAK_HA=1` two JobManagers elect a leader (a 2 s lease): a JobManager failure
//! is then the leader SIGKILLed (replaced by a new standby on its ports) or paused past its
//! lease and woken (it must stop, fenced, and is replaced too).
//!
//! With `EDDY_SOAK_STATE_BACKEND=rocksdb` the soaked job (not the failure-free one) keeps
//! its keyed state (aggregates, Top-N, deduplication, windows, regular, interval and
//! temporal joins) in LSM stores, with `EDDY_SOAK_STATE_MEMORY` (default `2mb`) a subtask:
//! most of it on disk, checkpointed as shared runs, the expiring joins' rows read back by
//! stored timers.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::chaos::{Seen, Systems, create_tables, difference, job, running_on, seen};
use crate::faults::{FaultyProxy, Mode};
use crate::postgres_cdc;
use crate::processes::{Cluster, signal};
use crate::recovery::{next, seeded, windows_into_files};
use crate::support::{Scratch, run_ok, visible_lines};

/// The failpoints a restarted JobManager may carry, each aborting it at a checkpoint.
const JOBMANAGER_FAILPOINTS: &[&str] = &[
    "jobmanager.before-metadata",
    "jobmanager.after-commit-log",
    "jobmanager.before-notify",
];
/// The failpoints a replacement TaskManager may carry.
const TASKMANAGER_FAILPOINTS: &[&str] = &["taskmanager.after-prepare", "taskmanager.before-commit"];

/// How long a cut-off TaskManager stays silent: past the JobManager's heartbeat timeout
/// (2 s in these clusters), so that its tasks run on elsewhere while it still runs them.
const CUT_OFF: Duration = Duration::from_millis(3500);

fn setting(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The soak's job: the chaos test's job with 1-second checkpoints and a 100 ms restart
/// backoff, the windows of the issue that found the hole of a replaced JobManager, a
/// regular join of every bid with its auction, totalled per category into PostgreSQL
/// (its state grows with the events: the one the LSM backend spills), and an interval and
/// a temporal join, whose state the watermark drops. `settings` go first.
fn soak_job(
    name: &str,
    events: u64,
    rate: u64,
    systems: &Systems,
    windows: &Path,
    settings: &str,
) -> String {
    format!(
        "{settings}{}
         SET 'execution.checkpointing.interval' = '1s';
         SET 'restart-strategy.exponential-delay.initial-backoff' = '100ms';
         SET 'restart-strategy.exponential-delay.max-backoff' = '1s';
         {}
         {}
         {}",
        job(name, events, rate, "exactly-once", systems),
        windows_into_files("time_", windows, events, rate),
        join_per_category(name, events, rate, systems),
        event_time_joins(name, events, rate, systems)
    )
}

/// The options of a Nexmark table of the soak's events.
fn nexmark(table: &str, events: u64, rate: u64) -> String {
    format!(
        "'connector' = 'nexmark', 'nexmark.table' = '{table}', 'events.num' = '{events}', \
         'events.rate' = '{rate}'"
    )
}

/// Every bid joined with its auction (a regular join: both sides kept), counted and
/// summed per category into `{name}_per_category`, exactly once.
fn join_per_category(name: &str, events: u64, rate: u64, systems: &Systems) -> String {
    let nexmark = |table: &str| nexmark(table, events, rate);
    format!(
        "CREATE TABLE join_bid (auction BIGINT, price BIGINT) WITH ({});
         CREATE TABLE join_auction (id BIGINT, category BIGINT) WITH ({});
         CREATE TABLE per_category (category BIGINT, bids BIGINT, total BIGINT,
           PRIMARY KEY (category) NOT ENFORCED) WITH ({});
         INSERT INTO per_category SELECT A.category, COUNT(*), SUM(B.price)
           FROM join_bid AS B JOIN join_auction AS A ON B.auction = A.id GROUP BY A.category;",
        nexmark("bid"),
        nexmark("auction"),
        systems
            .pg
            .sink_options(&format!("{name}_per_category"), "exactly-once")
    )
}

/// The joins whose state the watermark drops, each totalled into PostgreSQL exactly once:
/// every auction with the bids of its first 5 seconds (a LEFT interval join: an auction
/// with none comes out padded when it expires) per category into
/// `{name}_interval_per_category`, and every bid with its bidder as of the bid's time (an
/// event-time temporal join on the persons as a versioned table) per state into
/// `{name}_temporal_per_state`.
fn event_time_joins(name: &str, events: u64, rate: u64, systems: &Systems) -> String {
    let nexmark = |table: &str| nexmark(table, events, rate);
    let time = "dateTime TIMESTAMP(3), WATERMARK FOR dateTime AS dateTime - INTERVAL '1' SECOND";
    format!(
        "CREATE TABLE ej_bid (auction BIGINT, bidder BIGINT, price BIGINT, {time}) WITH ({});
         CREATE TABLE ej_auction (id BIGINT, category BIGINT, {time}) WITH ({});
         CREATE TABLE ej_person (id BIGINT, state VARCHAR, {time},
           PRIMARY KEY (id) NOT ENFORCED) WITH ({});
         CREATE TABLE interval_per_category (category BIGINT, auctions BIGINT, bids BIGINT,
           total BIGINT, PRIMARY KEY (category) NOT ENFORCED) WITH ({});
         CREATE TABLE temporal_per_state (state VARCHAR, bids BIGINT, total BIGINT,
           PRIMARY KEY (state) NOT ENFORCED) WITH ({});
         INSERT INTO interval_per_category
           SELECT A.category, COUNT(DISTINCT A.id), COUNT(B.price), SUM(B.price)
           FROM ej_auction AS A LEFT JOIN ej_bid AS B ON A.id = B.auction
             AND B.dateTime BETWEEN A.dateTime AND A.dateTime + INTERVAL '5' SECOND
           GROUP BY A.category;
         INSERT INTO temporal_per_state SELECT P.state, COUNT(*), SUM(B.price)
           FROM ej_bid AS B JOIN ej_person FOR SYSTEM_TIME AS OF B.dateTime AS P
             ON B.bidder = P.id
           GROUP BY P.state;",
        nexmark("bid"),
        nexmark("auction"),
        nexmark("person"),
        systems
            .pg
            .sink_options(&format!("{name}_interval_per_category"), "exactly-once"),
        systems
            .pg
            .sink_options(&format!("{name}_temporal_per_state"), "exactly-once"),
    )
}

/// The PostgreSQL tables the soak's own job parts write, beside the chaos test's.
const SOAK_TABLES: [&str; 3] = [
    "per_category",
    "interval_per_category",
    "temporal_per_state",
];

/// Creates the tables of [`soak_job`] beyond the chaos test's.
fn create_soak_tables(systems: &Systems, name: &str) {
    create_tables(systems, name);
    systems.pg.execute(&format!(
        "CREATE TABLE {name}_per_category (category BIGINT PRIMARY KEY, bids BIGINT, \
         total BIGINT);
         CREATE TABLE {name}_interval_per_category (category BIGINT PRIMARY KEY, \
         auctions BIGINT, bids BIGINT, total BIGINT);
         CREATE TABLE {name}_temporal_per_state (state TEXT PRIMARY KEY, bids BIGINT, \
         total BIGINT);"
    ));
}

/// The settings of the soaked run's state backend (`EDDY_SOAK_STATE_BACKEND`,
/// `EDDY_SOAK_STATE_MEMORY`); none for the default, `hashmap`.
fn state_backend_settings() -> String {
    let backend = std::env::var("EDDY_SOAK_STATE_BACKEND").unwrap_or_default();
    if backend.is_empty() || backend == "hashmap" {
        return String::new();
    }
    let memory = std::env::var("EDDY_SOAK_STATE_MEMORY").unwrap_or_else(|_| "2mb".into());
    format!(
        "SET 'state.backend.type' = '{backend}';
         SET 'state.backend.rocksdb.memory.fixed-per-slot' = '{memory}';
"
    )
}

/// What one run saw of its failures.
#[derive(Debug, Default)]
struct Kills {
    jobmanager: u64,
    taskmanager: u64,
    cut_off: u64,
    failpoints: u64,
    /// PostgreSQL restarted, or its sessions ended mid-commit.
    postgres: u64,
    /// The broker frozen for a while (or restarted).
    broker: u64,
    /// S3 answering 503s or hanging for a while, its open connections cut after.
    object_store: u64,
}

impl Kills {
    fn processes(&self) -> u64 {
        self.jobmanager + self.taskmanager + self.cut_off
    }

    fn external(&self) -> u64 {
        self.postgres + self.broker + self.object_store
    }

    fn total(&self) -> u64 {
        self.processes() + self.external()
    }
}

/// The lease of the soak's JobManagers under `EDDY_SOAK_HA=1`: [duration, renew interval].
const LEASE: [&str; 2] = ["2s", "250ms"];

/// How long a paused leader sleeps: past its lease, so that the standby takes over.
const PAUSE: Duration = Duration::from_millis(3500);

/// How long S3 misbehaves at a time.
const S3_FAULT: Duration = Duration::from_millis(2500);

/// The Kafka clients' request timeout in the soak: the broker's freezes outlast it.
const KAFKA_REQUEST_TIMEOUT: &str = "2000";

/// The rows of the table the postgres-cdc job starts from (its snapshot).
const CDC_ROWS: u64 = 20_000;

/// The newest checkpoint the job's status lists.
fn newest_checkpoint(status: &serde_json::Value) -> u64 {
    let listed = status["checkpoints"].as_array().into_iter().flatten();
    listed.filter_map(|c| c["id"].as_u64()).max().unwrap_or(0)
}

/// The failures of one run as they happen.
struct Chaos<'a> {
    cluster: &'a mut Cluster,
    systems: &'a mut Systems,
    /// Whether external systems fail too (half the failures).
    external: bool,
    /// Until when S3 misbehaves.
    s3_fault: Option<Instant>,
    /// Until when the broker is frozen.
    broker_frozen: Option<Instant>,
    rng: &'a mut u64,
    kills: Kills,
    /// Per TaskManager (by start index): killed or aborted, and replaced.
    dead: Vec<bool>,
    /// The TaskManager cut off, and until when.
    cut_off: Option<(usize, Instant)>,
    /// The newest checkpoint seen.
    newest: u64,
    /// Two JobManagers elect a leader.
    ha: bool,
    /// The paused leader (by index), and until when.
    paused: Option<(usize, Instant)>,
    /// A woken leader (by index), expected to stop.
    woken: Option<usize>,
}

impl<'a> Chaos<'a> {
    fn new(
        cluster: &'a mut Cluster,
        systems: &'a mut Systems,
        external: bool,
        rng: &'a mut u64,
    ) -> Self {
        let dead = vec![false; cluster.taskmanagers.len()];
        let ha = !cluster.standbys.is_empty();
        Chaos {
            cluster,
            systems,
            external,
            s3_fault: None,
            broker_frozen: None,
            rng,
            kills: Kills::default(),
            dead,
            cut_off: None,
            newest: 0,
            ha,
            paused: None,
            woken: None,
        }
    }

    /// Fails processes until `target` failures happened and the job finished; returns
    /// the failures and the job's last status.
    fn run(mut self, job_id: &str, target: u64) -> (Kills, serde_json::Value) {
        let mut next_kill = self.next_pause();
        let deadline = Instant::now() + Duration::from_secs(target * 10 + 900);
        loop {
            assert!(Instant::now() < deadline, "the job did not finish in time");
            self.restart_the_aborted();
            if let Some((i, until)) = self.paused
                && Instant::now() >= until
            {
                signal(self.cluster.ha_jobmanager(i).0.child.id(), "CONT");
                self.paused = None;
                self.woken = Some(i);
            }
            if let Some((i, until)) = self.cut_off
                && Instant::now() >= until
            {
                // It may have ended meanwhile (aborted at a failpoint just before it was
                // stopped): then it is replaced already.
                let taskmanager = &mut self.cluster.taskmanagers[i].child;
                if taskmanager.try_wait().ok().flatten().is_none() {
                    signal(taskmanager.id(), "CONT");
                }
                self.cut_off = None;
            }
            if self.s3_fault.is_some_and(|until| Instant::now() >= until) {
                let proxy = self.systems.s3_proxy.as_ref().expect("an S3 proxy");
                proxy.set(Mode::Forward);
                proxy.cut();
                self.s3_fault = None;
            }
            if self
                .broker_frozen
                .is_some_and(|until| Instant::now() >= until)
            {
                self.systems.kafka.resume();
                self.broker_frozen = None;
            }
            let Some(status) = self.cluster.try_status(job_id) else {
                std::thread::sleep(Duration::from_millis(100));
                continue;
            };
            self.newest = self.newest.max(newest_checkpoint(&status));
            match status["state"].as_str().unwrap_or_default() {
                "FINISHED"
                    if self.cut_off.is_none()
                        && self.paused.is_none()
                        && self.s3_fault.is_none()
                        && self.broker_frozen.is_none() =>
                {
                    return (self.kills, status);
                }
                "FAILED" | "CANCELLED" => panic!("the job ended: {status}"),
                _ => {}
            }
            if self.kills.total() < target && Instant::now() >= next_kill {
                self.fail_one(&status);
                next_kill = self.next_pause();
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// When the next failure is due: 2-4 s from now.
    fn next_pause(&mut self) -> Instant {
        Instant::now() + Duration::from_millis(2000 + next(self.rng) % 2000)
    }

    /// Restarts the JobManager and replaces the TaskManagers that aborted at failpoints.
    fn restart_the_aborted(&mut self) {
        if self.ha {
            self.replace_stopped_jobmanagers();
        } else if self.cluster.jobmanager.child.try_wait().unwrap().is_some() {
            self.kills.jobmanager += 1;
            self.kills.failpoints += 1;
            let total = self.kills.total();
            eprintln!("  failure {total}: the JobManager aborted at its failpoint");
            self.cluster.restart_jobmanager();
        }
        for i in 0..self.cluster.taskmanagers.len() {
            if !self.dead[i]
                && self.cluster.taskmanagers[i]
                    .child
                    .try_wait()
                    .unwrap()
                    .is_some()
            {
                self.kills.taskmanager += 1;
                self.kills.failpoints += 1;
                let total = self.kills.total();
                eprintln!(
                    "  failure {total}: TaskManager {} aborted at its failpoint",
                    i + 1
                );
                self.replace_taskmanager(i, None);
            }
        }
    }

    /// Under high availability: replaces the JobManagers that stopped, each by a new
    /// standby on its ports; one that was not a woken leader (which stops, fenced) aborted
    /// at its failpoint.
    fn replace_stopped_jobmanagers(&mut self) {
        for i in 0..2 {
            if self
                .cluster
                .ha_jobmanager(i)
                .0
                .child
                .try_wait()
                .unwrap()
                .is_none()
            {
                continue;
            }
            if self.woken == Some(i) {
                self.woken = None;
            } else {
                self.kills.jobmanager += 1;
                self.kills.failpoints += 1;
                let total = self.kills.total();
                eprintln!("  failure {total}: JobManager {i} aborted at its failpoint");
            }
            self.cluster.replace_ha_jobmanager(i, LEASE, &[]);
        }
    }

    /// Under high availability, the leader fails: SIGKILLed and replaced by a standby
    /// (which may carry a failpoint), or paused past its lease and woken later.
    fn fail_leader(&mut self, status: &serde_json::Value) {
        let address = status["leader"]["address"].as_str().unwrap_or_default();
        let leader = (0..2)
            .find(|i| address.ends_with(&format!(":{}", self.cluster.ha_jobmanager(*i).1)))
            .unwrap_or(0);
        let total = self.kills.total();
        if self.paused.is_none() && self.woken.is_none() && next(self.rng).is_multiple_of(3) {
            eprintln!("  failure {total}: SIGSTOP the leader, JobManager {leader}, for {PAUSE:?}");
            signal(self.cluster.ha_jobmanager(leader).0.child.id(), "STOP");
            self.paused = Some((leader, Instant::now() + PAUSE));
            return;
        }
        let with = self.failpoint(JOBMANAGER_FAILPOINTS);
        eprintln!(
            "  failure {total}: SIGKILL the leader, JobManager {leader} (its replacement with {with:?})"
        );
        let extra: Vec<(&str, &str)> = with
            .iter()
            .map(|p| ("EDDY_FAILPOINTS", p.as_str()))
            .collect();
        if self.woken == Some(leader) {
            self.woken = None;
        }
        if self.paused.is_some_and(|(i, _)| i == leader) {
            self.paused = None;
        }
        self.cluster.replace_ha_jobmanager(leader, LEASE, &extra);
    }

    /// Half the time, one of `names` set to a checkpoint soon after the newest.
    fn failpoint(&mut self, names: &[&str]) -> Option<String> {
        next(self.rng).is_multiple_of(2).then(|| {
            let name = names[(next(self.rng) as usize) % names.len()];
            format!("{name}={}", self.newest + 1 + next(self.rng) % 4)
        })
    }

    /// Starts a TaskManager in place of the ended one `i`, with `failpoints` if any.
    fn replace_taskmanager(&mut self, i: usize, failpoints: Option<&str>) {
        self.dead[i] = true;
        match failpoints {
            Some(points) => self
                .cluster
                .add_taskmanager_with(2, &[("EDDY_FAILPOINTS", points)]),
            None => self.cluster.add_taskmanager(2),
        }
        self.dead.push(false);
    }

    /// One failure: the JobManager killed (every third at least), a TaskManager cut off,
    /// or a TaskManager (one running tasks, if any does) killed; restarted or replaced
    /// ones may carry a failpoint.
    fn fail_one(&mut self, status: &serde_json::Value) {
        if self.external && next(self.rng).is_multiple_of(2) {
            return self.fail_external();
        }
        let roll = next(self.rng) % 6;
        let busy = running_on(status);
        let alive: Vec<usize> = (0..self.dead.len()).filter(|i| !self.dead[*i]).collect();
        let victims: Vec<usize> = alive.iter().copied().filter(|i| busy.contains(i)).collect();
        let victims = if victims.is_empty() { alive } else { victims };
        let victim = victims[(next(self.rng) as usize) % victims.len()];
        let jobmanager_due = self.kills.jobmanager * 3 < self.kills.processes() + 1;
        if (roll < 2 || jobmanager_due) && self.ha {
            self.kills.jobmanager += 1;
            self.fail_leader(status);
        } else if roll < 2 || jobmanager_due {
            self.kills.jobmanager += 1;
            let with = self.failpoint(JOBMANAGER_FAILPOINTS);
            let total = self.kills.total();
            eprintln!("  failure {total}: SIGKILL the JobManager (restarted with {with:?})");
            match &with {
                Some(points) => self
                    .cluster
                    .restart_jobmanager_with(&[("EDDY_FAILPOINTS", points)]),
                None => self.cluster.restart_jobmanager(),
            }
        } else if roll == 2 && self.cut_off.is_none() {
            self.kills.cut_off += 1;
            let total = self.kills.total();
            eprintln!(
                "  failure {total}: TaskManager {} cut off for {CUT_OFF:?}",
                victim + 1
            );
            signal(self.cluster.taskmanagers[victim].child.id(), "STOP");
            self.cut_off = Some((victim, Instant::now() + CUT_OFF));
        } else if self.cut_off.is_none_or(|(i, _)| i != victim) {
            self.kills.taskmanager += 1;
            let with = self.failpoint(TASKMANAGER_FAILPOINTS);
            let total = self.kills.total();
            eprintln!(
                "  failure {total}: SIGKILL TaskManager {} (replaced with {with:?})",
                victim + 1
            );
            let child = &mut self.cluster.taskmanagers[victim].child;
            child.kill().unwrap();
            let _ = child.wait();
            self.replace_taskmanager(victim, with.as_deref());
        }
    }
}

impl Chaos<'_> {
    /// One failure of an external system: PostgreSQL restarted or its sessions ended, the
    /// broker frozen for 2.5-6 s (or restarted), or S3 failing requests or hanging for a
    /// while (then every open connection cut).
    fn fail_external(&mut self) {
        let roll = next(self.rng) % 5;
        let total = self.kills.total() + 1;
        match roll {
            0 => {
                self.kills.postgres += 1;
                eprintln!("  failure {total}: PostgreSQL restarted");
                self.systems.pg.restart();
            }
            1 => {
                self.kills.postgres += 1;
                eprintln!("  failure {total}: PostgreSQL's sessions ended");
                self.systems.pg.cut_connections();
            }
            2 if setting("EDDY_SOAK_BROKER_RESTARTS", 0) == 1 => {
                self.kills.broker += 1;
                eprintln!("  failure {total}: the broker restarted");
                self.systems.kafka.restart();
            }
            2 if self.broker_frozen.is_none() => {
                self.kills.broker += 1;
                let frozen = Duration::from_millis(2500 + next(self.rng) % 3500);
                eprintln!("  failure {total}: the broker frozen for {frozen:?}");
                self.systems.kafka.pause();
                self.broker_frozen = Some(Instant::now() + frozen);
            }
            _ if self.s3_fault.is_none() => {
                self.kills.object_store += 1;
                let mode = match roll {
                    3 => Mode::Errors,
                    _ => Mode::Stall,
                };
                eprintln!("  failure {total}: S3 {mode:?} for {S3_FAULT:?}");
                let proxy = self.systems.s3_proxy.as_ref().expect("an S3 proxy");
                proxy.set(mode);
                proxy.cut();
                self.s3_fault = Some(Instant::now() + S3_FAULT);
            }
            _ => {
                self.kills.postgres += 1;
                eprintln!("  failure {total}: PostgreSQL's sessions ended");
                self.systems.pg.cut_connections();
            }
        }
    }
}

/// What readers see of a run: the chaos test's sinks and the windows' files.
struct Output {
    seen: Seen,
    windows: Vec<String>,
    hidden_windows: Vec<String>,
}

fn output(systems: &Systems, name: &str, windows: &Scratch) -> Output {
    let mut lines = visible_lines(windows.path());
    lines.sort();
    let hidden_windows = std::fs::read_dir(windows.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.'))
        .collect();
    let mut seen = seen(systems, name);
    for table in SOAK_TABLES {
        let rows = systems
            .pg
            .query(&format!("SELECT * FROM {name}_{table} ORDER BY 1"));
        seen.tables.insert(table, rows);
    }
    Output {
        seen,
        windows: lines,
        hidden_windows,
    }
}

/// A sink's name, the rows a run left in it and the rows the failure-free run did.
type SinkRows = (String, Vec<Vec<String>>, Vec<Vec<String>>);

/// Every difference between a run and the failure-free one, and the rows checked.
fn differences(got: &Output, expected: &Output) -> (Vec<String>, usize) {
    let as_rows =
        |lines: &[String]| -> Vec<Vec<String>> { lines.iter().map(|l| vec![l.clone()]).collect() };
    let mut sinks: Vec<SinkRows> = expected
        .seen
        .tables
        .iter()
        .map(|(table, rows)| {
            (
                format!("table {table}"),
                got.seen.tables[table].clone(),
                rows.clone(),
            )
        })
        .collect();
    sinks.push((
        "S3 files".into(),
        as_rows(&got.seen.file_lines),
        as_rows(&expected.seen.file_lines),
    ));
    sinks.push((
        "topic".into(),
        as_rows(&got.seen.records),
        as_rows(&expected.seen.records),
    ));
    sinks.push((
        "window files".into(),
        as_rows(&got.windows),
        as_rows(&expected.windows),
    ));
    let mut all = Vec::new();
    let mut checked = 0;
    for (sink, got, expected) in sinks {
        checked += expected.len();
        assert!(
            !expected.is_empty(),
            "{sink}: the failure-free run wrote nothing"
        );
        all.extend(
            difference(&got, &expected)
                .into_iter()
                .map(|d| format!("{sink}: {d}")),
        );
    }
    for hidden in got.seen.hidden_files.iter().chain(&got.hidden_windows) {
        all.push(format!("hidden file left: {hidden}"));
    }
    (all, checked)
}

/// One soak run; returns whether it was exact.
fn soak_run(run: u64, target: u64, rate: u64, rng: &mut u64) -> bool {
    let name = format!("soak{run}");
    let mut systems = Systems::start(&name);
    let external = setting("EDDY_SOAK_EXTERNAL", 1) == 1;
    if external {
        let moto = systems
            .s3
            .endpoint
            .trim_start_matches("http://")
            .to_string();
        systems.s3_proxy = Some(FaultyProxy::start(&moto));
        systems.kafka_options =
            format!(", 'properties.socket.timeout.ms' = '{KAFKA_REQUEST_TIMEOUT}'");
    }
    let mut cluster = match setting("EDDY_SOAK_HA", 0) {
        1 => Cluster::start_ha(&name, (3, 2), LEASE, &[], &[]),
        _ => Cluster::start(&name, 3, 2),
    };
    let windows = Scratch::new("soak-windows");
    // Enough events to outlast the failures (2-4 s apart, restarts replaying).
    let events = (rate * target * 4).max(200_000);
    create_soak_tables(&systems, &name);
    let backend = state_backend_settings();
    let script = soak_job(&name, events, rate, &systems, windows.path(), &backend);
    // Beside it, a postgres-cdc job mirrors and aggregates a table a writer changes.
    postgres_cdc::prepare(&systems.pg, CDC_ROWS, "FULL");
    let cdc_job = cluster.submit(&postgres_cdc::job(&systems.pg, "soak_cdc", "all", ""), 2);
    let writer = postgres_cdc::Writer::start(&systems.pg, next(rng), CDC_ROWS, true);
    let started = Instant::now();
    let job_id = cluster.submit(&script, 2);
    let (kills, status) =
        Chaos::new(&mut cluster, &mut systems, external, rng).run(&job_id, target);
    let elapsed = started.elapsed();
    let got = output(&systems, &name, &windows);
    // The soaked job's transactions only: the postgres-cdc job still runs, and prepares
    // one at each of its checkpoints.
    let prepared = systems.pg.query(&format!(
        "SELECT gid FROM pg_prepared_xacts WHERE gid LIKE 'eddy/{job_id}/%'"
    ));
    let changes = writer.stop();
    let cdc = postgres_cdc::convergence(&systems.pg, Duration::from_secs(300));
    let cdc_restarts = cluster.status(&cdc_job)["restarts"].clone();
    postgres_cdc::cancel_and_assert_released(
        &cluster,
        &cdc_job,
        &systems.pg,
        &["soak_cdc_m", "soak_cdc_t"],
    );
    let left = systems.pg.query(&format!(
        "SELECT gid FROM pg_prepared_xacts WHERE gid LIKE 'eddy/{cdc_job}/%'"
    ));
    eprintln!(
        "run {run}: the cancelled postgres-cdc job left {} transactions prepared: {left:?}",
        left.len()
    );

    // The reference runs without faults, straight to S3.
    systems.s3_proxy = None;
    create_soak_tables(&systems, "reference");
    let reference_windows = Scratch::new("soak-reference-windows");
    let reference = soak_job(
        "reference",
        events,
        0,
        &systems,
        reference_windows.path(),
        "",
    );
    run_ok(&cluster.scratch, &reference, 2);
    let expected = output(&systems, "reference", &reference_windows);

    let (mut found, mut checked) = differences(&got, &expected);
    match cdc {
        Ok(rows) => checked += rows,
        Err(difference) => found.push(format!("postgres-cdc: {difference}")),
    }
    eprintln!("run {run}: postgres-cdc: {changes} statements written, {cdc_restarts} restarts");
    found.extend(
        prepared
            .iter()
            .map(|gid| format!("transaction left prepared: {gid:?}")),
    );
    eprintln!(
        "run {run}: {} failures ({} JobManager, {} TaskManager, {} cut off; {} at failpoints; \
         {} external: {} PostgreSQL, {} broker, {} S3), {} restarts, {events} events in \
         {elapsed:.0?}, {checked} rows checked, {} differences",
        kills.total(),
        kills.jobmanager,
        kills.taskmanager,
        kills.cut_off,
        kills.failpoints,
        kills.external(),
        kills.postgres,
        kills.broker,
        kills.object_store,
        status["restarts"],
        found.len()
    );
    for difference in &found {
        eprintln!("  {difference}");
    }
    found.is_empty()
}

#[test]
#[ignore = "a soak of minutes a run: bench/chaos-soak.sh runs it"]
fn chaos_soak() {
    let target = setting("EDDY_SOAK_KILLS", 50);
    let runs = setting("EDDY_SOAK_RUNS", 1);
    let rate = setting("EDDY_SOAK_RATE", 20_000);
    let mut rng = seeded();
    let inexact: Vec<u64> = (1..=runs)
        .filter(|run| !soak_run(*run, target, rate, &mut rng))
        .collect();
    eprintln!(
        "soak: {} of {runs} runs exact ({target} failures each)",
        runs - inexact.len() as u64
    );
    assert!(inexact.is_empty(), "runs with differences: {inexact:?}");
}
