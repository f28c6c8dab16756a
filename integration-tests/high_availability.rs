//! JobManager high availability with real processes: two JobManagers share a checkpoint
//! directory on a moto S3 server and elect a leader through a lease kept there;
//! TaskManagers and clients are given both addresses. The leader dies (at the failpoint
//! between a checkpoint's commit and the sinks' notification, or by SIGKILL) or is paused
//! past its lease; the standby takes over. A run whose tasks all still run is adopted (no
//! restart); one that lost a task with the leader restarts from its checkpoint. Either way
//! an exactly-once job into PostgreSQL, S3 files and a Kafka topic ends exactly as a
//! failure-free run.

use std::time::{Duration, Instant};

use crate::chaos::{Seen, Systems, create_tables, difference, failure_free, job, seen};
use crate::processes::{Cluster, signal};
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

/// Two JobManagers (the first leading, with `env`) and two TaskManagers of two slots,
/// keeping checkpoints, job records and the lease on the S3 server of `systems`.
fn start_on_s3(name: &str, systems: &Systems, env: &[(&str, &str)]) -> Cluster {
    let lease = lease();
    let checkpoints = format!("s3://eddy/{name}-checkpoints");
    let mut all: Vec<(&str, &str)> = systems.s3.env().to_vec();
    all.extend(env);
    Cluster::start_ha(
        name,
        (2, 2),
        [&lease[0], &lease[1]],
        &["--checkpoint-dir", &checkpoints],
        &all,
    )
}

/// Starts a standby on the ports of the leader that died (`cluster.jobmanager`), so that
/// the TaskManagers' list of addresses stays whole; returns its port.
fn replace_leader(cluster: &mut Cluster) -> u16 {
    let lease = lease();
    cluster.replace_ha_jobmanager(0, [&lease[0], &lease[1]], &[]);
    cluster.ha_jobmanager(0).1
}

/// The job's restarts so far, as `eddy status` shows them.
fn restarts(status: &serde_json::Value) -> u64 {
    status["restarts"].as_u64().unwrap_or(0)
}

/// Waits until the leading JobManager of `cluster` exited (at its failpoint); returns its
/// exit status. If it does not, the failure shows how far job `job` got.
fn leader_exited(cluster: &mut Cluster, job: &str, within: Duration) -> std::process::ExitStatus {
    let deadline = Instant::now() + within;
    loop {
        if let Some(status) = cluster.jobmanager.child.try_wait().unwrap() {
            return status;
        }
        assert!(
            Instant::now() < deadline,
            "the JobManager did not exit within {within:?}; the job: {}",
            run_history(cluster, job)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// What a failure message needs of job `job`'s runs: its state, restarts and the
/// checkpoints its status lists.
fn run_history(cluster: &Cluster, job: &str) -> String {
    let Some(status) = cluster.try_status(job) else {
        return "no JobManager answers".into();
    };
    let checkpoints: Vec<String> = status["checkpoints"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| format!("{}:{}", c["id"], c["state"].as_str().unwrap_or("?")))
        .collect();
    format!(
        "state {}, reason {}, restarts {}, restored from {}, checkpoints [{}]",
        status["state"],
        status["reason"],
        restarts(&status),
        status["restored_from"],
        checkpoints.join(" ")
    )
}

/// Asserts that `got`, what job `job` wrote, equals the failure-free run, with no
/// transaction left prepared.
fn assert_exact(systems: &Systems, cluster: &Cluster, job: &str, got: Seen) {
    let expected = failure_free(systems, cluster, "exactly-once");
    assert!(!expected.file_lines.is_empty() && !expected.records.is_empty());
    assert!(got.hidden_files.is_empty(), "{:?}", got.hidden_files);
    for (table, rows) in &expected.tables {
        let wrong: Vec<_> = difference(&got.tables[table], rows)
            .into_iter()
            .take(10)
            .collect();
        assert!(
            wrong.is_empty(),
            "table {table} differs: {wrong:?}; the job: {}",
            run_history(cluster, job)
        );
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
fn a_standby_takes_over_from_a_leader_that_dies_and_adopts_the_running_job() {
    let _exclusive = exclusive();
    let systems = Systems::start("ha");
    let mut rng = seeded();
    let crash = 3 + next(&mut rng) % 4;
    eprintln!("the first leader aborts before notifying checkpoint {crash}");
    let failpoint = format!("jobmanager.before-notify={crash}");
    let mut cluster = start_on_s3("ha", &systems, &[("EDDY_FAILPOINTS", failpoint.as_str())]);
    create_tables(&systems, "ha");
    let job_id = cluster.submit(&job("ha", EVENTS, 12_000, "exactly-once", &systems), 2);

    // The first leader commits checkpoint `crash` and dies before any sink hears of it.
    let status = leader_exited(&mut cluster, &job_id, Duration::from_secs(90));
    let died = Instant::now();
    assert!(!status.success(), "the leader aborted at its failpoint");
    let first = checkpoint_after(&cluster, &job_id, crash, Duration::from_secs(60));
    eprintln!(
        "failover 1: checkpoint {first} completed under the new leader {:?} after the old one died",
        died.elapsed()
    );
    let port = replace_leader(&mut cluster);

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
    // Both new leaders found every task still running and adopted the run: the job never
    // restarted, and its sinks committed checkpoint `crash` on the adopter's notice.
    assert_eq!(restarts(&status), 0, "the run was restarted: {status}");
    assert_eq!(status["restored_from"].as_u64().unwrap_or(0), 0, "{status}");
    // `eddy status` names the leader: the third term, on the replaced JobManager's port.
    assert_eq!(status["leader"]["term"], 3, "{}", status["leader"]);
    let address = status["leader"]["address"].as_str().unwrap_or_default();
    assert!(address.ends_with(&format!(":{port}")), "{address}");
    // So does the REST API (which the dashboard's header shows).
    let leader = crate::http::get_json(&cluster.http, "/v1/leader");
    assert_eq!(leader["high_availability"], true, "{leader}");
    assert_eq!(leader["term"], 3, "{leader}");
    assert_eq!(leader["address"].as_str(), Some(address), "{leader}");
    assert_exact(&systems, &cluster, &job_id, seen(&systems, "ha"));
}

#[test]
fn a_run_that_lost_a_taskmanager_with_the_leader_restarts_from_its_checkpoint() {
    let _exclusive = exclusive();
    let systems = Systems::start("halost");
    let mut cluster = start_on_s3("halost", &systems, &[]);
    create_tables(&systems, "halost");
    let job_id = cluster.submit(&job("halost", EVENTS, 12_000, "exactly-once", &systems), 2);
    let before = checkpoint_after(&cluster, &job_id, 2, Duration::from_secs(60));

    // The leader and a TaskManager die together: the run cannot be adopted whole.
    cluster.jobmanager.child.kill().unwrap();
    let _ = cluster.jobmanager.child.wait();
    drop(cluster.taskmanagers.remove(1));
    cluster.add_taskmanager(2);
    let after = checkpoint_after(&cluster, &job_id, before, Duration::from_secs(90));
    eprintln!("checkpoint {after} completed after the restart");
    finished(&cluster, &job_id);
    let status = cluster.status(&job_id);
    assert!(
        restarts(&status) >= 1,
        "the run was not restarted: {status}"
    );
    let restored = status["restored_from"].as_u64().unwrap_or(0);
    assert!(
        restored >= before,
        "restored checkpoint {restored}: {status}"
    );
    assert_exact(&systems, &cluster, &job_id, seen(&systems, "halost"));
}

#[test]
fn a_paused_leader_is_fenced_off_when_it_wakes() {
    let _exclusive = exclusive();
    let systems = Systems::start("split");
    let logs = crate::support::Scratch::new("split-logs");
    let logs_dir = logs.path().display().to_string();
    let mut cluster = start_on_s3(
        "split",
        &systems,
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
    // The TaskManagers found the new leader once their calls to the paused one timed out,
    // and it adopted the run.
    let status = cluster.status(&job_id);
    assert_eq!(restarts(&status), 0, "the run was restarted: {status}");
    assert_exact(&systems, &cluster, &job_id, seen(&systems, "split"));
}
