//! JobManager high availability with real processes: two JobManagers share a checkpoint
//! directory and elect a leader through a lease kept there; TaskManagers and clients are
//! given both addresses. The leader dies (at the failpoint between a checkpoint's commit
//! and the sinks' notification, or by SIGKILL) or is paused past its lease; the standby
//! takes over, and an exactly-once job into PostgreSQL, S3 files and a Kafka topic ends
//! exactly as a failure-free run.

use std::time::{Duration, Instant};

use crate::chaos::{Seen, Systems, create_tables, difference, failure_free, job, seen};
use crate::processes::{Cluster, Daemon, ha_jobmanager, signal};
use crate::recovery::{next, seeded};
use crate::support::exclusive;

/// The lease in these tests: [duration, renew interval] (`EDDY_TEST_HA_LEASE=10s,2s`
/// measures the defaults' failover).
fn lease() -> [String; 2] {
    let set = std::env::var("EDDY_TEST_HA_LEASE").unwrap_or_else(|_| "2s,250ms".into());
    let (duration, renew) = set
        .split_once(',')
        .expect("EDDY_TEST_HA_LEASE=DURATION,RENEW");
    [duration.to_string(), renew.to_string()]
}
const EVENTS: u64 = 300_000;

/// The newest completed checkpoint the job's status lists (0: none), if a JobManager
/// answers.
fn newest_checkpoint(cluster: &Cluster, job: &str) -> Option<u64> {
    let status = cluster.try_status(job)?;
    let listed = status["checkpoints"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let completed = listed.iter().filter(|c| c["state"] == "COMPLETED");
    Some(
        completed
            .filter_map(|c| c["id"].as_u64())
            .max()
            .unwrap_or(0),
    )
}

/// Waits until a checkpoint newer than `after` completed; returns it.
fn checkpoint_after(cluster: &Cluster, job: &str, after: u64, within: Duration) -> u64 {
    let deadline = Instant::now() + within;
    loop {
        if let Some(newest) = newest_checkpoint(cluster, job)
            && newest > after
        {
            return newest;
        }
        assert!(
            Instant::now() < deadline,
            "no checkpoint after {after} completed within {within:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Starts a JobManager on the port of the one that died (so the TaskManagers' list of
/// addresses stays whole): a new standby.
fn replace_on(cluster: &Cluster, port: u16, http: &str) -> Daemon {
    let lease = lease();
    ha_jobmanager((port, http), &cluster.scratch, [&lease[0], &lease[1]], &[])
}

/// Waits until `daemon` exited; returns its exit status.
fn exited(daemon: &mut Daemon, within: Duration) -> std::process::ExitStatus {
    let deadline = Instant::now() + within;
    loop {
        if let Some(status) = daemon.child.try_wait().unwrap() {
            return status;
        }
        assert!(Instant::now() < deadline, "the JobManager did not exit");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Asserts that `got` equals the failure-free run, with no transaction left prepared.
fn assert_exact(systems: &Systems, cluster: &Cluster, got: Seen) {
    let expected = failure_free(systems, cluster, "exactly-once");
    assert!(!expected.file_lines.is_empty() && !expected.records.is_empty());
    assert!(got.hidden_files.is_empty(), "{:?}", got.hidden_files);
    for (table, rows) in &expected.tables {
        let wrong: Vec<_> = difference(&got.tables[table], rows)
            .into_iter()
            .take(10)
            .collect();
        assert!(wrong.is_empty(), "table {table} differs: {wrong:?}");
    }
    assert!(got.file_lines == expected.file_lines, "the S3 files differ");
    assert!(got.records == expected.records, "the Kafka topic differs");
    let prepared = systems.pg.query("SELECT gid FROM pg_prepared_xacts");
    assert!(
        prepared.is_empty(),
        "transactions left prepared: {prepared:?}"
    );
}

/// Waits for the job to finish, through whichever JobManager leads.
fn finished(cluster: &Cluster, job: &str) {
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        assert!(Instant::now() < deadline, "the job did not finish");
        if let Some(status) = cluster.try_status(job) {
            match status["state"].as_str().unwrap_or_default() {
                "FINISHED" => return,
                "FAILED" | "CANCELLED" => panic!("the job ended: {status}"),
                _ => {}
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn a_standby_takes_over_from_a_leader_that_dies() {
    let _exclusive = exclusive();
    let systems = Systems::start("ha");
    let lease = lease();
    let mut rng = seeded();
    let crash = 3 + next(&mut rng) % 4;
    eprintln!("the first leader aborts before notifying checkpoint {crash}");
    let failpoint = format!("jobmanager.before-notify={crash}");
    let mut cluster = Cluster::start_ha(
        "ha",
        2,
        2,
        [&lease[0], &lease[1]],
        &[("EDDY_FAILPOINTS", failpoint.as_str())],
    );
    create_tables(&systems, "ha");
    let job_id = cluster.submit(&job("ha", EVENTS, 12_000, "exactly-once", &systems), 2);

    // The first leader commits checkpoint `crash` and dies before any sink hears of it.
    let status = exited(&mut cluster.jobmanager, Duration::from_secs(90));
    let died = Instant::now();
    assert!(!status.success(), "the leader aborted at its failpoint");
    let first = checkpoint_after(&cluster, &job_id, crash, Duration::from_secs(60));
    eprintln!(
        "failover 1: checkpoint {first} completed under the new leader {:?} after the old one died",
        died.elapsed()
    );
    let (port, http) = {
        let address = cluster.address.split(',').next().unwrap();
        let port: u16 = address.rsplit(':').next().unwrap().parse().unwrap();
        (port, cluster.http.clone())
    };
    cluster.jobmanager = replace_on(&cluster, port, &http);

    // The second leader is SIGKILLed; the replacement standby takes over.
    let (leader, _, _) = &mut cluster.standbys[0];
    leader.child.kill().unwrap();
    let _ = leader.child.wait();
    let died = Instant::now();
    let second = checkpoint_after(&cluster, &job_id, first, Duration::from_secs(60));
    eprintln!(
        "failover 2: checkpoint {second} completed under the new leader {:?} after SIGKILL",
        died.elapsed()
    );
    finished(&cluster, &job_id);
    let status = cluster.status(&job_id);
    let restored = status["restored_from"].as_u64().unwrap_or(0);
    assert!(
        restored >= first,
        "the last leader restored checkpoint {restored}"
    );
    // `eddy status` names the leader: the third term, on the replaced JobManager's port.
    assert_eq!(status["leader"]["term"], 3, "{}", status["leader"]);
    let address = status["leader"]["address"].as_str().unwrap_or_default();
    assert!(address.ends_with(&format!(":{port}")), "{address}");
    assert_exact(&systems, &cluster, seen(&systems, "ha"));
}

#[test]
fn a_paused_leader_is_fenced_off_when_it_wakes() {
    let _exclusive = exclusive();
    let systems = Systems::start("split");
    let lease = lease();
    let logs = crate::support::Scratch::new("split-logs");
    let logs_dir = logs.path().display().to_string();
    let mut cluster = Cluster::start_ha(
        "split",
        2,
        2,
        [&lease[0], &lease[1]],
        &[("EDDY_TEST_STDERR_DIR", logs_dir.as_str())],
    );
    create_tables(&systems, "split");
    let job_id = cluster.submit(&job("split", EVENTS, 12_000, "exactly-once", &systems), 2);
    let before = checkpoint_after(&cluster, &job_id, 1, Duration::from_secs(60));

    // Paused past its lease: the standby takes over and completes checkpoints.
    signal(cluster.jobmanager.child.id(), "STOP");
    let paused = Instant::now();
    let under_new = checkpoint_after(&cluster, &job_id, before, Duration::from_secs(60));
    eprintln!(
        "checkpoint {under_new} completed under the new leader {:?} after the pause",
        paused.elapsed()
    );
    // Woken, the old leader finds its lease taken and stops, writing nothing.
    signal(cluster.jobmanager.child.id(), "CONT");
    let log = cluster.jobmanager.log.clone().expect("a log file");
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = cluster.jobmanager.child.try_wait().unwrap() {
            break status;
        }
        let said = std::fs::read_to_string(&log).unwrap_or_default();
        assert!(
            Instant::now() < deadline,
            "the old leader did not stop: {said}"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(!status.success());
    let said = std::fs::read_to_string(&log).unwrap();
    let telling: Vec<&str> = said
        .lines()
        .filter(|l| l.contains("lease") || l.contains("fenced"))
        .collect();
    for line in &telling {
        eprintln!("old leader: {line}");
    }
    // It stops when its lease keeper finds the lease taken, or sooner when one of its
    // writes (a job record, a commit) is refused by the later term.
    assert!(
        said.contains("lost the leader lease") || said.contains("fenced off by a later term"),
        "the old leader's log: {said}"
    );
    // Commands the old leader sent before it noticed (if it sent any) were refused by the
    // TaskManagers, which follow the new term.
    for entry in std::fs::read_dir(logs.path()).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        for line in text
            .lines()
            .filter(|l| l.contains("earlier jobmanager term"))
        {
            eprintln!("{}: {line}", path.display());
        }
    }
    finished(&cluster, &job_id);
    assert_exact(&systems, &cluster, seen(&systems, "split"));
}
