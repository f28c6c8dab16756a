//! Checkpoints and recovery with real processes: TaskManagers killed with SIGKILL at
//! random moments, a corrupt checkpoint on a real S3-compatible server.

use std::collections::BTreeMap;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::postgres::Postgres;
use crate::processes::Cluster;
use crate::s3::S3Server;
use crate::support::{Scratch, parse_changes, run_script, visible_lines};

const TWO_MINUTES: Duration = Duration::from_secs(120);

/// A bounded, deterministic Nexmark aggregation, throttled to run for several seconds,
/// into an upsert print sink.
pub fn job(events: u64, rate: u64, mode: &str, backoff: &str) -> String {
    format!(
        "SET 'execution.checkpointing.interval' = '500ms';
         SET 'execution.checkpointing.mode' = '{mode}';
         SET 'restart-strategy.exponential-delay.initial-backoff' = '{backoff}';
         SET 'restart-strategy.exponential-delay.max-backoff' = '{backoff}';
         CREATE TABLE bid (auction BIGINT, price BIGINT) WITH ('connector' = 'nexmark',
           'nexmark.table' = 'bid', 'events.num' = '{events}', 'events.rate' = '{rate}');
         CREATE TABLE o (auction BIGINT, c BIGINT, s BIGINT, PRIMARY KEY (auction) NOT ENFORCED)
           WITH ('connector' = 'print');
         INSERT INTO o SELECT auction, COUNT(*), SUM(price) FROM bid GROUP BY auction;"
    )
}

/// Per auction, the final (count, sum) of a failure-free run on the embedded cluster.
pub fn failure_free(scratch: &Scratch, events: u64) -> BTreeMap<String, (i64, i64)> {
    let script = format!(
        "CREATE TABLE bid (auction BIGINT, price BIGINT) WITH ('connector' = 'nexmark',
           'nexmark.table' = 'bid', 'events.num' = '{events}');
         CREATE TABLE o (auction BIGINT, c BIGINT, s BIGINT) WITH ('connector' = 'print');
         INSERT INTO o SELECT auction, COUNT(*), SUM(price) FROM bid GROUP BY auction;"
    );
    let output = run_script(scratch, &script, 2);
    assert!(output.status.success());
    largest_counts(&String::from_utf8_lossy(&output.stdout))
}

/// Per auction, the row with the largest count among all printed updates. Counts only
/// grow, so after replays this is the final value; a lost row makes it smaller, a row
/// counted twice larger.
pub fn largest_counts(printed: &str) -> BTreeMap<String, (i64, i64)> {
    let mut result: BTreeMap<String, (i64, i64)> = BTreeMap::new();
    for change in parse_changes(printed)
        .into_iter()
        .filter(|c| c.op == "+I" || c.op == "+U")
    {
        let value = (
            change.fields[1].parse().unwrap(),
            change.fields[2].parse().unwrap(),
        );
        let entry = result.entry(change.fields[0].clone()).or_insert(value);
        if value.0 > entry.0 {
            *entry = value;
        }
    }
    result
}

/// Waits until `count` checkpoints of the job have completed; returns their ids.
fn wait_for_checkpoints(cluster: &Cluster, job_id: &str, count: usize) -> Vec<u64> {
    let deadline = Instant::now() + TWO_MINUTES;
    loop {
        let completed: Vec<u64> = cluster.status(job_id)["checkpoints"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["state"] == "COMPLETED")
            .map(|c| c["id"].as_u64().unwrap())
            .collect();
        if completed.len() >= count {
            return completed;
        }
        assert!(
            Instant::now() < deadline,
            "{} of {count} checkpoints completed",
            completed.len()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A small random source seeded from the clock; the seed is printed so a failing run can be
/// replayed with EDDY_TEST_SEED.
pub fn seeded() -> u64 {
    let seed = std::env::var("EDDY_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        });
    eprintln!("random seed: {seed} (set EDDY_TEST_SEED={seed} to replay)");
    seed
}

pub fn next(state: &mut u64) -> u64 {
    *state = state
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    *state >> 33
}

/// Runs the job on 2 TaskManagers x 2 slots, SIGKILLs a random TaskManager three times at
/// random moments (starting a replacement each time), and returns the printed output.
fn run_with_kills(name: &str, mode: &str) -> (Cluster, serde_json::Value) {
    let cluster = Cluster::start(name, 2, 2);
    let script = job(200_000, 25_000, mode, "200ms");
    kill_while_running(cluster, &script)
}

/// Submits `script` at parallelism 4 and SIGKILLs a random TaskManager three times at
/// random moments (starting a replacement each time); returns the final status.
pub fn kill_while_running(mut cluster: Cluster, script: &str) -> (Cluster, serde_json::Value) {
    let mut rng = seeded();
    let job_id = cluster.submit(script, 4);
    cluster.wait_for(&job_id, "RUNNING", TWO_MINUTES);
    for kill in 0..3 {
        std::thread::sleep(Duration::from_millis(1200 + next(&mut rng) % 1500));
        let alive: Vec<usize> = (0..cluster.taskmanagers.len())
            .filter(|i| cluster.taskmanagers[*i].child.try_wait().unwrap().is_none())
            .collect();
        let victim = alive[(next(&mut rng) as usize) % alive.len()];
        eprintln!("kill {}: SIGKILL TaskManager {}", kill + 1, victim + 1);
        cluster.taskmanagers[victim].child.kill().unwrap();
        cluster.add_taskmanager(2);
    }
    let status = cluster.wait_for(&job_id, "FINISHED", TWO_MINUTES);
    (cluster, status)
}

#[test]
fn exactly_once_survives_taskmanager_kills() {
    let (cluster, status) = run_with_kills("exactly-once", "EXACTLY_ONCE");
    let expected = failure_free(&cluster.scratch, 200_000);
    let total: i64 = expected.values().map(|v| v.0).sum();
    assert_eq!(total, 184_000, "46 of every 50 events are bids");
    let restarts = assert_exact_after_restarts(&status, &expected, &cluster.printed());
    eprintln!(
        "exactly-once: {restarts} restarts, restored from checkpoint {}",
        status["restored_from"]
    );
}

/// Settings that put GROUP BY state in the LSM store with so little memory that most
/// groups of each subtask live on disk.
pub const LSM_BACKEND: &str = "SET 'state.backend.type' = 'rocksdb';
     SET 'state.backend.rocksdb.memory.fixed-per-slot' = '256kb';
";

/// The LSM runs stored with the job's checkpoints, by file name.
fn stored_runs(scratch: &Scratch) -> Vec<String> {
    let mut runs = Vec::new();
    let mut pending = vec![scratch.path().join("checkpoints")];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            match path.is_dir() {
                true => pending.push(path),
                false if path.extension().is_some_and(|e| e == "run") => {
                    runs.push(entry.file_name().to_string_lossy().into_owned())
                }
                false => {}
            }
        }
    }
    runs
}

/// The GROUP BY with its groups in LSM stores (most on disk), TaskManagers killed: every
/// key's count and sum exact, restored from runs stored once with the checkpoints.
#[test]
fn the_lsm_backend_survives_taskmanager_kills() {
    let (cluster, status, restarts) = lsm_job_with_kills(Cluster::start("lsm-kills", 2, 2));
    let runs = stored_runs(&cluster.scratch);
    assert!(!runs.is_empty(), "checkpoints refer to stored runs");
    eprintln!(
        "lsm backend: {restarts} restarts, restored from checkpoint {}, {} runs stored",
        status["restored_from"],
        runs.len()
    );
}

/// The GROUP BY on the LSM backend on `cluster`, whose TaskManagers are killed: asserts
/// every key's count and sum exact; returns the cluster, the job's status and its restarts.
fn lsm_job_with_kills(cluster: Cluster) -> (Cluster, serde_json::Value, u64) {
    let script = format!(
        "{LSM_BACKEND}{}",
        job(200_000, 25_000, "EXACTLY_ONCE", "200ms")
    );
    let (cluster, status) = kill_while_running(cluster, &script);
    let expected = failure_free(&cluster.scratch, 200_000);
    let restarts = assert_exact_after_restarts(&status, &expected, &cluster.printed());
    (cluster, status, restarts)
}

/// The same with the checkpoints on S3: the runs are stored as objects, and each restore
/// reads them back in ranges, checking their sizes and CRC-32s.
#[test]
fn the_lsm_backend_restores_its_runs_from_s3() {
    let s3 = S3Server::start("eddy");
    let env = s3.env();
    let cluster = Cluster::start_with(
        "lsm-kills-s3",
        2,
        2,
        &["--checkpoint-dir", "s3://eddy/checkpoints"],
        &env,
    );
    let (_cluster, status, restarts) = lsm_job_with_kills(cluster);
    let runs: Vec<String> = s3
        .keys("eddy", "checkpoints/")
        .into_iter()
        .filter(|key| key.contains("/shared/") && key.ends_with(".run"))
        .collect();
    assert!(!runs.is_empty(), "checkpoints refer to runs on S3");
    eprintln!(
        "lsm backend on S3: {restarts} restarts, restored from checkpoint {}, {} runs stored",
        status["restored_from"],
        runs.len()
    );
}

/// The LSM runs stored with checkpoint `id` of `job_id` (in its own `shared/`): the files
/// that only it and later checkpoints refer to.
fn runs_stored_with(cluster: &Cluster, job_id: &str, id: u64) -> Vec<std::path::PathBuf> {
    let shared = cluster
        .scratch
        .path()
        .join(format!("checkpoints/{job_id}/chk-{id}/shared"));
    let mut runs: Vec<_> = std::fs::read_dir(shared)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "run"))
        .collect();
    runs.sort();
    runs
}

/// Starts the LSM GROUP BY (with `settings`) at parallelism 4, kills a TaskManager once 3
/// checkpoints completed, and, while the job waits out its restart delay, hands `damage`
/// a run stored with the newest checkpoint that stored any; then starts a replacement.
/// Returns the cluster, the job and the damaged run's checkpoint.
fn damage_a_run_before_the_restore(
    name: &str,
    settings: &str,
    damage: impl FnOnce(&std::path::Path),
) -> (Cluster, String, u64) {
    let mut cluster = Cluster::start(name, 2, 2);
    // A long delay leaves time to damage the run before the restart reads it.
    let script = format!(
        "{LSM_BACKEND}{settings}{}",
        job(200_000, 25_000, "EXACTLY_ONCE", "3s")
    );
    let job_id = cluster.submit(&script, 4);
    wait_for_checkpoints(&cluster, &job_id, 3);
    cluster.taskmanagers[0].child.kill().unwrap();
    cluster.wait_for(&job_id, "RESTARTING", TWO_MINUTES);
    let completed = wait_for_checkpoints(&cluster, &job_id, 3);
    let (damaged, run) = completed
        .iter()
        .rev()
        .find_map(|id| Some((*id, runs_stored_with(&cluster, &job_id, *id).pop()?)))
        .expect("a completed checkpoint stored runs");
    eprintln!("damaging {}", run.display());
    damage(&run);
    cluster.add_taskmanager(2);
    (cluster, job_id, damaged)
}

/// A run missing from the checkpoint storage: the JobManager's check before the restart
/// finds it, skips every checkpoint that refers to it (the job has no 2PC sinks) and
/// restores an older one; the counts come out exact.
#[test]
fn a_missing_lsm_run_skips_the_checkpoints_that_refer_to_it() {
    let (cluster, job_id, damaged) =
        damage_a_run_before_the_restore("lsm-missing-run", "", |run| {
            std::fs::remove_file(run).unwrap()
        });
    let status = cluster.wait_for(&job_id, "FINISHED", TWO_MINUTES);
    let restored = status["restored_from"].as_u64().unwrap_or(0);
    assert!(
        restored < damaged,
        "restored checkpoint {restored}, which refers to a run of checkpoint {damaged}"
    );
    let expected = failure_free(&cluster.scratch, 200_000);
    assert_eq!(largest_counts(&cluster.printed()), expected);
}

/// A run whose bytes changed but not its size (the check before the restart passes): the
/// restore's CRC-32 check refuses it and fails the task naming the file, every restart
/// again, until the restart strategy gives up. Nothing is restored from it: no count
/// printed after the damage exceeds the true one.
#[test]
fn a_corrupt_lsm_run_fails_the_restore_naming_it() {
    let settings = "SET 'restart-strategy.type' = 'fixed-delay';
         SET 'restart-strategy.fixed-delay.attempts' = '2';
         SET 'restart-strategy.fixed-delay.delay' = '3s';
";
    let mut name = String::new();
    let (cluster, job_id, _) =
        damage_a_run_before_the_restore("lsm-corrupt-run", settings, |run| {
            name = run.file_name().unwrap().to_string_lossy().into_owned();
            let mut bytes = std::fs::read(run).unwrap();
            let middle = bytes.len() / 2;
            bytes[middle] ^= 0xff;
            std::fs::write(run, bytes).unwrap();
        });
    let status = cluster.wait_for(&job_id, "FAILED", TWO_MINUTES);
    let reason = status["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains(&name) && reason.contains("CRC"),
        "the failure names the corrupt run {name}: {reason}"
    );
    let expected = failure_free(&cluster.scratch, 200_000);
    for (auction, counted) in largest_counts(&cluster.printed()) {
        let truth = expected[&auction];
        assert!(
            counted.0 <= truth.0,
            "auction {auction}: {counted:?} printed, {truth:?} in all"
        );
    }
}

/// A job on the LSM backend stopped with a savepoint resumes at another parallelism on
/// the LSM backend (each subtask reads its key groups of the stored runs), and on the
/// `hashmap` backend (the groups read into memory).
#[test]
fn an_lsm_savepoint_resumes_at_another_parallelism_and_backend() {
    savepoint_resumes(
        "savepoint-lsm",
        LSM_BACKEND,
        &[("b", 3, LSM_BACKEND), ("c", 1, "")],
    );
}

/// Files read in many small byte-range splits, the readers killed mid-split and restored
/// from their byte offsets: every line counted exactly once.
#[test]
fn files_read_in_splits_survive_taskmanager_kills() {
    let cluster = Cluster::start("file-splits", 2, 2);
    let input = cluster.scratch.path().join("input");
    std::fs::create_dir_all(&input).unwrap();
    let mut expected: BTreeMap<String, (i64, i64)> = BTreeMap::new();
    for (file, ids) in [("a.csv", 1..=70_000i64), ("b.csv", 70_001..=100_000)] {
        let mut lines = String::new();
        for id in ids {
            let key = id % 97;
            lines.push_str(&format!("{id},{key}\n"));
            let entry = expected.entry(key.to_string()).or_default();
            entry.0 += 1;
            entry.1 += id;
        }
        std::fs::write(input.join(file), lines).unwrap();
    }
    let script = format!(
        "SET 'execution.checkpointing.interval' = '300ms';
         SET 'restart-strategy.exponential-delay.initial-backoff' = '200ms';
         SET 'restart-strategy.exponential-delay.max-backoff' = '200ms';
         CREATE TABLE src (id BIGINT, k BIGINT) WITH ('connector' = 'filesystem',
           'path' = '{}', 'format' = 'csv', 'source.split-size' = '20000');
         CREATE TABLE o (k BIGINT, c BIGINT, s BIGINT, PRIMARY KEY (k) NOT ENFORCED)
           WITH ('connector' = 'print', 'rows-per-second' = '300');
         INSERT INTO o SELECT k, COUNT(*), SUM(id) FROM src GROUP BY k;",
        input.display()
    );
    let (cluster, status) = kill_while_running(cluster, &script);
    assert_exact_after_restarts(&status, &expected, &cluster.printed());
}

/// A join's two sides of keyed state, restored after TaskManagers are killed: every bid
/// joined with its auction exactly once.
#[test]
fn joins_survive_taskmanager_kills() {
    join_with_kills("join-kills", "", JoinShape::Regular);
}

/// The regular join with its keys in LSM stores (most on disk), TaskManagers killed:
/// exact.
#[test]
fn joins_on_the_lsm_backend_survive_taskmanager_kills() {
    join_with_kills("join-lsm-kills", LSM_BACKEND, JoinShape::Regular);
}

/// The same with an interval join, whose rows the watermark drops: what a restore brings
/// back expires again, and every bid of an auction's first seconds is counted once.
#[test]
fn interval_joins_survive_taskmanager_kills() {
    join_with_kills("interval-join-kills", "", JoinShape::Interval);
}

/// The same on the LSM backend with the least memory it takes: most keys' rows are in the
/// store and expire through their stored timers, also after a restore from a checkpoint's
/// runs.
#[test]
fn interval_joins_on_the_lsm_backend_survive_taskmanager_kills() {
    let settings = "SET 'state.backend.type' = 'rocksdb';
        SET 'state.backend.rocksdb.memory.fixed-per-slot' = '1kb';";
    join_with_kills("interval-join-lsm-kills", settings, JoinShape::Interval);
}

/// An interval join followed by a lookup join (of a file read whole): the lookup keeps no
/// state, the interval join's comes back, and each bid is counted once under its
/// category's code.
#[test]
fn interval_and_lookup_joins_survive_taskmanager_kills() {
    join_with_kills("interval-lookup-kills", "", JoinShape::IntervalThenLookup);
}

/// The same with a window join: the windows open at a checkpoint come back with their rows
/// and are joined once when the watermark closes them.
#[test]
fn window_joins_survive_taskmanager_kills() {
    join_with_kills("window-join-kills", "", JoinShape::Window);
}

/// Which join `join_with_kills` runs.
#[derive(Clone, Copy, PartialEq)]
enum JoinShape {
    /// On the auction id only: both sides held for good.
    Regular,
    /// Bids of an auction's first 5 seconds: rows expire with the watermark.
    Interval,
    /// Bids and auctions of the same 2-second window: windows dropped when they close.
    Window,
    /// As `Interval`, then each category looked up in a file as of the bid's processing
    /// time.
    IntervalThenLookup,
}

/// As above with unaligned checkpoints: rows in flight to the join are stored with the
/// input they came from and replayed into the right side.
#[test]
fn joins_survive_taskmanager_kills_with_unaligned_checkpoints() {
    join_with_kills(
        "join-kills-unaligned",
        "SET 'execution.checkpointing.unaligned' = 'true';
         SET 'table.exec.mini-batch.size' = '500';",
        JoinShape::Regular,
    );
}

/// Bids joined with their auctions as `shape` says, counted per category, on a cluster
/// whose TaskManagers are killed.
fn join_with_kills(name: &str, settings: &str, shape: JoinShape) {
    let cluster = Cluster::start(name, 2, 2);
    let codes = cluster.scratch.write(
        "codes/part-0.csv",
        &(0..100)
            .map(|c| format!("{c},{}\n", c * 100))
            .collect::<String>(),
    );
    let codes = codes.parent().unwrap().display().to_string();
    let time = ", dateTime TIMESTAMP(3), p AS PROCTIME(),
      WATERMARK FOR dateTime AS dateTime - INTERVAL '1' SECOND";
    let windowed = |table: &str| {
        format!(
            "(SELECT * FROM TABLE(TUMBLE(TABLE {table}, DESCRIPTOR(dateTime), INTERVAL '2' SECOND)))"
        )
    };
    let interval = " AND b.dateTime BETWEEN a.dateTime AND a.dateTime + INTERVAL '5' SECOND";
    let (time, bid, auction, condition) = match shape {
        JoinShape::Regular => ("", "bid".into(), "auction".into(), ""),
        JoinShape::IntervalThenLookup => (time, "bid".into(), "auction".into(), interval),
        JoinShape::Interval => (
            time,
            "bid".into(),
            "auction".into(),
            " AND b.dateTime BETWEEN a.dateTime AND a.dateTime + INTERVAL '5' SECOND",
        ),
        JoinShape::Window => (
            time,
            windowed("bid"),
            windowed("auction"),
            " AND b.window_start = a.window_start AND b.window_end = a.window_end",
        ),
    };
    let (lookup, group) = match shape {
        JoinShape::IntervalThenLookup => (
            " JOIN codes FOR SYSTEM_TIME AS OF b.p AS c ON a.category = c.id",
            "c.code",
        ),
        _ => ("", "a.category"),
    };
    let tables = |events: u64, rate: &str| {
        format!(
            "CREATE TABLE codes (id BIGINT, code BIGINT)
               WITH ('connector' = 'filesystem', 'path' = '{codes}', 'format' = 'csv');
             CREATE TABLE bid (auction BIGINT, price BIGINT{time}) WITH ('connector' = 'nexmark',
               'nexmark.table' = 'bid', 'events.num' = '{events}'{rate});
             CREATE TABLE auction (id BIGINT, category BIGINT{time}) WITH (
               'connector' = 'nexmark', 'nexmark.table' = 'auction',
               'events.num' = '{events}'{rate});
             INSERT INTO o SELECT {group}, COUNT(*), SUM(b.price)
               FROM {bid} AS b JOIN {auction} AS a ON b.auction = a.id{condition}{lookup}
               GROUP BY {group};"
        )
    };
    let script = format!(
        "{settings}
         SET 'execution.checkpointing.interval' = '500ms';
         SET 'restart-strategy.exponential-delay.initial-backoff' = '200ms';
         SET 'restart-strategy.exponential-delay.max-backoff' = '200ms';
         CREATE TABLE o (category BIGINT, c BIGINT, s BIGINT, PRIMARY KEY (category) NOT ENFORCED)
           WITH ('connector' = 'print');
         {}",
        tables(150_000, ", 'events.rate' = '25000'")
    );
    let (cluster, status) = kill_while_running(cluster, &script);
    let failure_free = format!(
        "CREATE TABLE o (category BIGINT, c BIGINT, s BIGINT) WITH ('connector' = 'print');
         {}",
        tables(150_000, "")
    );
    let output = run_script(&cluster.scratch, &failure_free, 2);
    assert!(output.status.success());
    let expected = largest_counts(&String::from_utf8_lossy(&output.stdout));
    let joined: i64 = expected.values().map(|v| v.0).sum();
    let least = match shape {
        JoinShape::Regular => 100_000,
        JoinShape::Interval | JoinShape::Window | JoinShape::IntervalThenLookup => 10_000,
    };
    assert!(joined > least, "bids join their auction: {joined}");
    assert_exact_after_restarts(&status, &expected, &cluster.printed());
}

/// Asserts that the kills restarted the job and that the largest printed (count, sum) of
/// every key is the expected one (none lost, none counted twice); returns the restarts.
fn assert_exact_after_restarts(
    status: &serde_json::Value,
    expected: &BTreeMap<String, (i64, i64)>,
    printed: &str,
) -> u64 {
    let restarts = status["restarts"].as_u64().unwrap();
    assert!(restarts >= 1, "the kills restarted the job: {status}");
    let got = largest_counts(printed);
    let wrong: Vec<_> = expected
        .iter()
        .filter(|(k, v)| got.get(*k) != Some(v))
        .take(5)
        .collect();
    assert!(
        wrong.is_empty(),
        "after {restarts} restarts, per-key (count, sum) differ: {wrong:?} got {:?}",
        wrong.iter().map(|(k, _)| got.get(*k)).collect::<Vec<_>>()
    );
    assert_eq!(got.len(), expected.len());
    restarts
}

#[test]
fn at_least_once_loses_nothing() {
    let (cluster, status) = run_with_kills("at-least-once", "AT_LEAST_ONCE");
    let expected = failure_free(&cluster.scratch, 200_000);
    let got = largest_counts(&cluster.printed());
    let missing: Vec<_> = expected
        .iter()
        .filter(|(k, v)| got.get(*k).is_none_or(|g| g.0 < v.0))
        .take(5)
        .collect();
    assert!(missing.is_empty(), "rows lost: {missing:?}");
    let duplicates: i64 =
        got.values().map(|v| v.0).sum::<i64>() - expected.values().map(|v| v.0).sum::<i64>();
    eprintln!(
        "at-least-once: {} restarts, {duplicates} bids counted twice",
        status["restarts"]
    );
}

#[test]
fn restore_skips_a_corrupt_checkpoint_on_s3() {
    let s3 = S3Server::start("eddy");
    let env = s3.env();
    let mut cluster = Cluster::start_with(
        "corrupt",
        2,
        2,
        &["--checkpoint-dir", "s3://eddy/checkpoints"],
        &env,
    );
    // A long backoff leaves time to damage the newest checkpoint before the restart.
    let job_id = cluster.submit(&job(200_000, 25_000, "EXACTLY_ONCE", "3s"), 4);
    wait_for_checkpoints(&cluster, &job_id, 3);
    cluster.taskmanagers[0].child.kill().unwrap();
    cluster.wait_for(&job_id, "RESTARTING", TWO_MINUTES);
    let newest = *wait_for_checkpoints(&cluster, &job_id, 3).last().unwrap();
    s3.put(
        "eddy",
        &format!("checkpoints/{job_id}/chk-{newest}/0-0.state"),
        "garbage, not a snapshot",
    );
    cluster.add_taskmanager(2);
    let status = cluster.wait_for(&job_id, "FINISHED", TWO_MINUTES);
    assert_eq!(
        status["restored_from"].as_u64().unwrap(),
        newest - 1,
        "fell back past the corrupt checkpoint: {status}"
    );
    let expected = failure_free(&cluster.scratch, 200_000);
    assert_eq!(largest_counts(&cluster.printed()), expected);
}

/// A JobManager SIGKILLed and started again while its TaskManagers live on: they
/// register with the tasks they still run, and the new JobManager adopts the run (no
/// restart) from its job store and the job's commit log.
#[test]
fn a_restarted_jobmanager_adopts_its_running_job_exactly() {
    let mut cluster = Cluster::start("jobmanager-kill", 2, 2);
    let job_id = cluster.submit(&job(200_000, 25_000, "EXACTLY_ONCE", "200ms"), 4);
    wait_for_checkpoints(&cluster, &job_id, 1);
    cluster.restart_jobmanager();
    let status = cluster.wait_for(&job_id, "FINISHED", TWO_MINUTES);
    assert_eq!(status["restarts"].as_u64().unwrap_or(0), 0, "{status}");
    assert_eq!(status["restored_from"].as_u64().unwrap_or(0), 0, "{status}");
    let expected = failure_free(&cluster.scratch, 200_000);
    assert_eq!(largest_counts(&cluster.printed()), expected);
}

/// A JobManager that stops between a checkpoint's commit point (its commit log) and its
/// `_metadata` (the soak found this window: every restart's TaskManagers failed to read
/// the metadata, for ever). With a TaskManager lost too, the run cannot be adopted: the
/// next JobManager restarts the job from that checkpoint, writing its metadata first.
#[test]
fn a_checkpoint_committed_without_its_metadata_is_restored() {
    let failpoint = [("EDDY_FAILPOINTS", "jobmanager.after-commit-log=3")];
    let mut cluster = Cluster::start_with("unwritten-metadata", 2, 2, &[], &failpoint);
    let job_id = cluster.submit(&job(200_000, 25_000, "EXACTLY_ONCE", "200ms"), 4);
    let deadline = Instant::now() + TWO_MINUTES;
    while cluster.jobmanager.child.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "the failpoint was not reached");
        std::thread::sleep(Duration::from_millis(50));
    }
    cluster.taskmanagers[0].child.kill().unwrap();
    cluster.add_taskmanager(2);
    cluster.remove_env("EDDY_FAILPOINTS");
    cluster.restart_jobmanager();
    let status = cluster.wait_for(&job_id, "FINISHED", TWO_MINUTES);
    assert!(status["restored_from"].as_u64().unwrap() >= 3, "{status}");
    let expected = failure_free(&cluster.scratch, 200_000);
    assert_eq!(largest_counts(&cluster.printed()), expected);
}

/// [`job`] without checkpoints (at-most-once: nothing to restart from).
fn job_without_checkpoints(events: u64, rate: u64) -> String {
    let script = job(events, rate, "AT_LEAST_ONCE", "200ms");
    let without = script.replace("SET 'execution.checkpointing.interval' = '500ms';", "");
    assert_ne!(script, without);
    without
}

/// A job without checkpoints lives through a JobManager restart as well: its run is
/// adopted, and its output is the failure-free run's, nothing lost, nothing repeated.
#[test]
fn a_restarted_jobmanager_adopts_a_job_without_checkpoints() {
    let mut cluster = Cluster::start("jobmanager-kill-no-checkpoints", 2, 2);
    let job_id = cluster.submit(&job_without_checkpoints(200_000, 25_000), 4);
    cluster.wait_for(&job_id, "RUNNING", TWO_MINUTES);
    std::thread::sleep(Duration::from_secs(2));
    cluster.restart_jobmanager();
    let status = cluster.wait_for(&job_id, "FINISHED", TWO_MINUTES);
    assert_eq!(status["restarts"].as_u64().unwrap_or(0), 0, "{status}");
    let expected = failure_free(&cluster.scratch, 200_000);
    assert_eq!(largest_counts(&cluster.printed()), expected);
}

/// A job without checkpoints whose run loses a TaskManager together with the JobManager
/// cannot be adopted, and has nothing to restart from: it fails, saying why.
#[test]
fn a_job_without_checkpoints_fails_when_its_run_cannot_be_adopted() {
    let mut cluster = Cluster::start("jobmanager-kill-no-checkpoints-tm", 2, 2);
    let job_id = cluster.submit(&job_without_checkpoints(2_000_000, 25_000), 4);
    cluster.wait_for(&job_id, "RUNNING", TWO_MINUTES);
    cluster.taskmanagers[0].child.kill().unwrap();
    cluster.restart_jobmanager();
    let status = cluster.wait_for(&job_id, "FAILED", TWO_MINUTES);
    let reason = status["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("did not run on whole"), "{status}");
    assert!(reason.contains("keeps no checkpoints"), "{status}");
}

/// 2-second tumbling windows of Nexmark bids per auction, exactly once into files under
/// `output`: the shape of the soak that found the hole of a replaced JobManager. Its
/// tables are `{prefix}bid` and `{prefix}windows`.
pub fn windows_into_files(
    prefix: &str,
    output: &std::path::Path,
    events: u64,
    rate: u64,
) -> String {
    format!(
        "CREATE TABLE {prefix}bid (auction BIGINT, price BIGINT, dateTime TIMESTAMP(3),
           WATERMARK FOR dateTime AS dateTime - INTERVAL '1' SECOND)
           WITH ('connector' = 'nexmark', 'nexmark.table' = 'bid', 'events.num' = '{events}',
           'events.rate' = '{rate}');
         CREATE TABLE {prefix}windows (window_start TIMESTAMP(3), auction BIGINT, bids BIGINT,
           top BIGINT) WITH ('connector' = 'filesystem', 'path' = '{}', 'format' = 'csv',
           'sink.delivery-guarantee' = 'exactly-once');
         INSERT INTO {prefix}windows SELECT window_start, auction, COUNT(*), MAX(price)
           FROM TABLE(TUMBLE(TABLE {prefix}bid, DESCRIPTOR(dateTime), INTERVAL '2' SECONDS))
           GROUP BY window_start, window_end, auction;",
        output.display()
    )
}

/// [`windows_into_files`] with 500 ms checkpoints and a 100 ms restart backoff.
fn windows_job(output: &std::path::Path, events: u64, rate: u64) -> String {
    format!(
        "SET 'execution.checkpointing.interval' = '500ms';
         SET 'restart-strategy.exponential-delay.initial-backoff' = '100ms';
         {}",
        windows_into_files("", output, events, rate)
    )
}

/// The windows in `output` are those of a failure-free run of [`windows_job`] (400 000
/// events), each once, and no file is left hidden.
pub fn assert_windows_exact(scratch: &Scratch, output: &std::path::Path) {
    let reference = scratch.path().join("reference");
    let script = windows_job(&reference, 400_000, 0);
    assert!(run_script(scratch, &script, 2).status.success());
    let (mut got, mut expected) = (visible_lines(output), visible_lines(&reference));
    got.sort();
    expected.sort();
    assert!(!expected.is_empty());
    let hidden = hidden_files(output);
    assert!(hidden.is_empty(), "files left hidden: {hidden:?}");
    let twice = got.len().saturating_sub(expected.len());
    assert!(
        got == expected,
        "{} window rows, {} expected ({twice} more)",
        got.len(),
        expected.len()
    );
}

/// A JobManager replaced three times while its TaskManagers live on: each time the new
/// JobManager adopts the running attempt (or, if it cannot, cancels it, whose sinks see
/// their input end, and restores the job). Nothing is committed twice, nothing lost.
#[test]
fn replaced_jobmanagers_leave_no_row_committed_twice() {
    let mut cluster = Cluster::start("jobmanager-replaced", 2, 2);
    let output = cluster.scratch.path().join("windows");
    let job_id = cluster.submit(&windows_job(&output, 400_000, 25_000), 2);
    for _ in 0..3 {
        wait_for_checkpoints(&cluster, &job_id, 2);
        cluster.restart_jobmanager();
    }
    cluster.wait_for(&job_id, "FINISHED", TWO_MINUTES);
    assert_windows_exact(&cluster.scratch, &output);
}

/// The hidden (uncommitted) files of a directory.
fn hidden_files(directory: &std::path::Path) -> Vec<String> {
    std::fs::read_dir(directory)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with('.'))
        .collect()
}

/// A stop with a savepoint commits everything the savepoint covers before the job ends,
/// nothing after it (no checkpoint follows it), and a job resumed from it writes the rest
/// exactly once.
#[test]
fn a_stop_with_savepoint_commits_what_it_covers_and_resumes_exactly() {
    let cluster = Cluster::start("savepoint-stop", 2, 2);
    let output = cluster.scratch.path().join("windows");
    let script = windows_job(&output, 400_000, 25_000);
    let job_id = cluster.submit(&script, 2);
    wait_for_checkpoints(&cluster, &job_id, 3);
    let stopped = cluster.client(&["stop", "--savepoint", &job_id]);
    let stderr = String::from_utf8_lossy(&stopped.stderr);
    assert!(stopped.status.success(), "{stderr}");
    let savepoint = String::from_utf8_lossy(&stopped.stdout).trim().to_string();
    cluster.wait_for(&job_id, "CANCELLED", TWO_MINUTES);
    assert!(
        !visible_lines(&output).is_empty(),
        "the savepoint's rows are committed"
    );
    assert_eq!(
        hidden_files(&output),
        Vec::<String>::new(),
        "left hidden at the stop"
    );
    let file = cluster.scratch.write("resume.sql", &script);
    let file = file.display().to_string();
    let submitted = cluster.client(&["submit", "--from-savepoint", &savepoint, &file]);
    let stderr = String::from_utf8_lossy(&submitted.stderr);
    assert!(submitted.status.success(), "{stderr}");
    let resumed = String::from_utf8_lossy(&submitted.stdout)
        .trim()
        .to_string();
    cluster.wait_for(&resumed, "FINISHED", TWO_MINUTES);
    assert_windows_exact(&cluster.scratch, &output);
}

/// Stops `job_id` with a savepoint after `checkpoints` checkpoints (a savepoint then
/// extends earlier files, which it copies); returns its path once the job is cancelled.
pub fn stop_with_savepoint(cluster: &Cluster, job_id: &str, checkpoints: usize) -> String {
    wait_for_checkpoints(cluster, job_id, checkpoints);
    let output = cluster.client(&["stop", "--savepoint", job_id]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let path = String::from_utf8_lossy(&output.stdout).trim().to_string();
    assert!(path.contains("/savepoints/savepoint-"), "{path}");
    cluster.wait_for(job_id, "CANCELLED", TWO_MINUTES);
    path
}

/// Submits `script` (written to `name`) from `savepoint` at `parallelism` and waits until
/// the resumed job finishes.
fn resume_until_finished(
    cluster: &Cluster,
    savepoint: &str,
    parallelism: usize,
    name: &str,
    script: &str,
) {
    let file = cluster.scratch.write(name, script);
    let output = cluster.client(&[
        "submit",
        "--from-savepoint",
        savepoint,
        "--parallelism",
        &parallelism.to_string(),
        &file.display().to_string(),
    ]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let resumed = String::from_utf8_lossy(&output.stdout).trim().to_string();
    cluster.wait_for(&resumed, "FINISHED", TWO_MINUTES);
}

#[test]
fn a_savepoint_resumes_at_another_parallelism() {
    savepoint_resumes("savepoint", "", &[("b", 3, ""), ("c", 1, "")]);
}

/// Runs the bounded aggregation with `settings` at parallelism 2, stops it with a
/// savepoint, and resumes it from there once per `(print id, parallelism, settings)`:
/// each resumed run ends with a failure-free run's counts.
fn savepoint_resumes(name: &str, settings: &str, resumes: &[(&str, usize, &str)]) {
    let cluster = Cluster::start(name, 2, 2);
    let with_id = |id: &str, settings: &str| {
        let script = job(200_000, 25_000, "EXACTLY_ONCE", "200ms").replace(
            "WITH ('connector' = 'print')",
            &format!("WITH ('connector' = 'print', 'print-identifier' = '{id}')"),
        );
        format!("{settings}{script}")
    };
    let job_id = cluster.submit(&with_id("a", settings), 2);
    let path = stop_with_savepoint(&cluster, &job_id, 3);
    let expected = failure_free(&cluster.scratch, 200_000);
    for (id, parallelism, settings) in resumes {
        let script = with_id(id, settings);
        let file = format!("resume-{id}.sql");
        resume_until_finished(&cluster, &path, *parallelism, &file, &script);
        // What the first run printed before the savepoint, then what the resumed one did.
        let printed: String = cluster
            .printed()
            .lines()
            .filter(|l| {
                l.starts_with("a:")
                    || l.starts_with(&format!("{id}:"))
                    || l.starts_with(&format!("{id}>"))
            })
            .map(|l| format!("{l}\n"))
            .collect();
        assert_eq!(
            largest_counts(&printed),
            expected,
            "resumed at parallelism {parallelism} with {settings:?}"
        );
    }
}

/// A Top-N's and a deduplication's partitions, split by key group over more subtasks: a
/// job stopped with a savepoint at parallelism 2 and resumed at 3 leaves the top bids and
/// each bidder's last bid in PostgreSQL (exactly-once) as a failure-free run does.
#[test]
fn a_top_n_and_a_deduplication_resume_from_a_savepoint_at_another_parallelism() {
    let cluster = Cluster::start("savepoint-top-n", 2, 2);
    let pg = Postgres::start("savepoint-top-n");
    for name in ["reference", "rescaled"] {
        pg.execute(&format!(
            "CREATE TABLE {name}_top (auction BIGINT, rn BIGINT, bidder BIGINT, price BIGINT,
               PRIMARY KEY (auction, rn));
             CREATE TABLE {name}_last (bidder BIGINT PRIMARY KEY, auction BIGINT, price BIGINT);"
        ));
    }
    let script = |name: &str, rate: &str| {
        let with = |table: &str| pg.sink_options(&format!("{name}_{table}"), "exactly-once");
        format!(
            "SET 'execution.checkpointing.interval' = '500ms';
             CREATE TABLE bid (auction BIGINT, bidder BIGINT, price BIGINT, dateTime TIMESTAMP(3),
               WATERMARK FOR dateTime AS dateTime - INTERVAL '1' SECOND) WITH (
               'connector' = 'nexmark', 'nexmark.table' = 'bid', 'events.num' = '200000',
               'nexmark.first-event-rate' = '1000'{rate});
             CREATE TABLE top (auction BIGINT, rn BIGINT, bidder BIGINT, price BIGINT,
               PRIMARY KEY (auction, rn) NOT ENFORCED) WITH ({});
             CREATE TABLE last_bid (bidder BIGINT, auction BIGINT, price BIGINT,
               PRIMARY KEY (bidder) NOT ENFORCED) WITH ({});
             INSERT INTO top SELECT auction, rn, bidder, price FROM (SELECT *, ROW_NUMBER()
               OVER (PARTITION BY auction ORDER BY price DESC, bidder) AS rn FROM bid)
               WHERE rn <= 3;
             INSERT INTO last_bid SELECT bidder, auction, price FROM (SELECT *, ROW_NUMBER()
               OVER (PARTITION BY bidder ORDER BY dateTime DESC) AS rn FROM bid) WHERE rn = 1;",
            with("top"),
            with("last")
        )
    };
    let rows = |name: &str| {
        (
            pg.query(&format!("SELECT * FROM {name}_top ORDER BY 1, 2")),
            pg.query(&format!("SELECT * FROM {name}_last ORDER BY 1")),
        )
    };
    let reference = script("reference", "");
    assert!(run_script(&cluster.scratch, &reference, 2).status.success());
    let expected = rows("reference");
    assert!(expected.0.len() > 1000 && expected.1.len() > 100);

    let job_id = cluster.submit(&script("rescaled", ", 'events.rate' = '25000'"), 2);
    let savepoint = stop_with_savepoint(&cluster, &job_id, 3);
    let stopped = rows("rescaled");
    assert!(stopped != expected, "the job was stopped before its end");
    let resume = script("rescaled", ", 'events.rate' = '25000'");
    resume_until_finished(&cluster, &savepoint, 3, "resume.sql", &resume);
    let got = rows("rescaled");
    assert!(got.0 == expected.0, "the top bids differ after the rescale");
    assert!(
        got.1 == expected.1,
        "the last bids differ after the rescale"
    );
}

#[test]
fn unaligned_checkpoints_complete_under_backpressure_and_restore_exactly() {
    let mut cluster = Cluster::start("unaligned", 2, 2);
    // A slow sink holds the pipeline back, so barriers find data queued in every channel:
    // unaligned barriers overtake it and the queued data goes into the checkpoint.
    let script = job(200_000, 40_000, "EXACTLY_ONCE", "200ms")
        .replace(
            "SET 'execution.checkpointing.mode'",
            "SET 'execution.checkpointing.unaligned' = 'true';\nSET 'table.exec.mini-batch.size' = '500';\nSET 'execution.checkpointing.mode'",
        )
        .replace("WITH ('connector' = 'print')", "WITH ('connector' = 'print', 'rows-per-second' = '4000')");
    let job_id = cluster.submit(&script, 4);
    // Unaligned checkpoints complete although the sink holds everything back.
    wait_for_checkpoints(&cluster, &job_id, 2);
    cluster.taskmanagers[0].child.kill().unwrap();
    cluster.add_taskmanager(2);
    let status = cluster.wait_for(&job_id, "FINISHED", TWO_MINUTES);
    assert!(status["restored_from"].as_u64().unwrap() > 0, "{status}");
    let expected = failure_free(&cluster.scratch, 200_000);
    assert_eq!(largest_counts(&cluster.printed()), expected);
}

#[test]
fn eddy_run_of_a_checkpointing_job_keeps_its_checkpoints_in_eddy_data() {
    let scratch = Scratch::new("run-checkpoints");
    let file = scratch.write("job.sql", &job(60_000, 20_000, "EXACTLY_ONCE", "200ms"));
    let output = crate::support::eddy()
        .current_dir(scratch.path())
        .args(["run", "-p", "2"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let expected = failure_free(&scratch, 60_000);
    assert_eq!(
        largest_counts(&String::from_utf8_lossy(&output.stdout)),
        expected
    );
    // The embedded cluster kept the job record and at least one committed checkpoint.
    let jobs: Vec<_> = std::fs::read_dir(scratch.path().join("eddy-data"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(jobs.len(), 1, "{jobs:?}");
    assert!(jobs[0].join("job.json").exists());
    let committed = std::fs::read_dir(&jobs[0])
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("_metadata").exists())
        .count();
    assert!(
        committed >= 1,
        "no committed checkpoint under {}",
        jobs[0].display()
    );
}

/// The metadata of every complete checkpoint of a job kept under `directory`.
fn checkpoint_metadata(directory: &std::path::Path) -> Vec<serde_json::Value> {
    let Ok(entries) = std::fs::read_dir(directory) else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| std::fs::read(entry.ok()?.path().join("_metadata")).ok())
        .filter_map(|bytes| serde_json::from_slice(&bytes).ok())
        .collect()
}

/// The task snapshots of `metadata` that extend earlier files.
fn extending_tasks(metadata: &serde_json::Value) -> Vec<serde_json::Value> {
    metadata["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["previous"].as_array().is_some_and(|p| !p.is_empty()))
        .cloned()
        .collect()
}

#[test]
fn incremental_checkpoints_extend_earlier_files_and_restore_exactly() {
    let mut cluster = Cluster::start("incremental", 2, 2);
    let job_id = cluster.submit(&job(200_000, 25_000, "EXACTLY_ONCE", "200ms"), 4);
    let directory = cluster.scratch.path().join("checkpoints").join(&job_id);
    let deadline = Instant::now() + TWO_MINUTES;
    while !checkpoint_metadata(&directory)
        .iter()
        .any(|m| !extending_tasks(m).is_empty())
    {
        assert!(
            Instant::now() < deadline,
            "no checkpoint extended an earlier one"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // The restart restores from a chain of files (or from a full snapshot taken since).
    cluster.taskmanagers[0].child.kill().unwrap();
    cluster.add_taskmanager(2);
    // The first checkpoint after the restart extends the files restored from instead of
    // writing the restored state again.
    let first_after_restart = loop {
        let status = cluster.status(&job_id);
        let restored = status["restored_from"].as_u64().unwrap_or(0);
        let first = status["checkpoints"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|c| c["state"] == "COMPLETED" && c["id"].as_u64() > Some(restored))
            .min_by_key(|c| c["id"].as_u64());
        if let (true, Some(first)) = (restored > 0, first) {
            break first.clone();
        }
        assert!(
            Instant::now() < deadline && status["state"] != "FINISHED",
            "no checkpoint after the restart: {status}"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(
        first_after_restart["size_bytes"].as_u64()
            < first_after_restart["full_size_bytes"].as_u64(),
        "{first_after_restart}"
    );
    let status = cluster.wait_for(&job_id, "FINISHED", TWO_MINUTES);
    assert!(status["restarts"].as_u64().unwrap() >= 1, "{status}");
    let expected = failure_free(&cluster.scratch, 200_000);
    assert_eq!(largest_counts(&cluster.printed()), expected);

    // Retention deleted old checkpoints, but never a file a retained one extends.
    let retained = checkpoint_metadata(&directory);
    assert_eq!(retained.len(), 3, "execution.checkpointing.num-retained");
    let mut smaller = 0;
    for metadata in &retained {
        for task in extending_tasks(metadata) {
            let previous = task["previous"].as_array().unwrap();
            for earlier in previous {
                let file = directory
                    .join(format!("chk-{}", earlier["checkpoint"]))
                    .join(earlier["file"].as_str().unwrap());
                let size = std::fs::metadata(&file).map(|m| m.len()).ok();
                assert_eq!(size, earlier["size"].as_u64(), "{}", file.display());
            }
            if task["size"].as_u64() < previous[0]["size"].as_u64() {
                smaller += 1;
            }
        }
    }
    eprintln!("{smaller} retained snapshots of changes are smaller than their full snapshot");
}

/// Windows into a filesystem table partitioned by `shard` (`auction % 5`) that commits its
/// partitions with success files, at parallelism 4 on a cluster whose TaskManagers are
/// killed at random: every partition holds exactly the rows of a failure-free run, each
/// once, no file stays hidden, and every partition has its success file.
#[test]
fn a_partitioned_sink_commits_partitions_exactly_once_through_kills() {
    let cluster = Cluster::start("partitioned-kills", 2, 2);
    let script = |output: &std::path::Path, rate: u64| {
        format!(
            "SET 'execution.checkpointing.interval' = '300ms';
             SET 'restart-strategy.exponential-delay.initial-backoff' = '100ms';
             CREATE TABLE bid (auction BIGINT, price BIGINT, dateTime TIMESTAMP(3),
               WATERMARK FOR dateTime AS dateTime - INTERVAL '1' SECOND)
               WITH ('connector' = 'nexmark', 'nexmark.table' = 'bid', 'events.num' = '300000',
               'events.rate' = '{rate}');
             CREATE TABLE windows (window_start TIMESTAMP(3), auction BIGINT, bids BIGINT,
               top BIGINT, shard BIGINT) PARTITIONED BY (shard)
               WITH ('connector' = 'filesystem', 'path' = '{}', 'format' = 'csv',
               'sink.delivery-guarantee' = 'exactly-once',
               'sink.partition-commit.policy.kind' = 'success-file');
             INSERT INTO windows SELECT window_start, auction, COUNT(*), MAX(price), auction % 5
               FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(dateTime), INTERVAL '2' SECONDS))
               GROUP BY window_start, window_end, auction;",
            output.display()
        )
    };
    let reference = cluster.scratch.path().join("reference");
    assert!(
        run_script(&cluster.scratch, &script(&reference, 0), 2)
            .status
            .success()
    );
    let output = cluster.scratch.path().join("windows");
    let (cluster, status) = kill_while_running(cluster, &script(&output, 25_000));
    let expected = partition_rows(&reference);
    assert_eq!(expected.len(), 5, "one partition per shard");
    let got = partition_rows(&output);
    for (partition, rows) in &expected {
        let written = got.get(partition).map_or(0, Vec::len);
        assert!(
            got.get(partition) == Some(rows),
            "{partition}: {written} rows, {} expected",
            rows.len()
        );
        let directory = output.join(partition);
        assert!(directory.join("_SUCCESS").exists(), "{partition} committed");
        assert_eq!(
            hidden_files(&directory),
            Vec::<String>::new(),
            "left hidden"
        );
    }
    assert_eq!(got.len(), expected.len());
    eprintln!(
        "partitioned: restored from checkpoint {}",
        status["restored_from"]
    );
    drop(cluster);
}

/// The visible rows of each partition directory (`shard=N`) of a table, sorted.
fn partition_rows(table: &std::path::Path) -> BTreeMap<String, Vec<String>> {
    let mut partitions = BTreeMap::new();
    for entry in std::fs::read_dir(table).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let mut rows = visible_lines(&entry.path());
        rows.sort();
        partitions.insert(name, rows);
    }
    partitions
}

/// A GROUP BY's state TTL runs on the wall clock through a savepoint: groups written
/// before a stop are expired when the job resumes more than the TTL later (their counts
/// start again at 1, with `+I`), while with a TTL longer than the pause they go on.
#[test]
fn a_state_ttl_keeps_its_clock_through_a_savepoint() {
    let cluster = Cluster::start("state-ttl", 1, 1);
    let script = |ttl: &str, id: &str| {
        format!(
            "SET 'execution.checkpointing.interval' = '300ms';
             SET 'table.exec.state.ttl' = '{ttl}';
             CREATE TABLE t (id BIGINT) WITH ('connector' = 'datagen', 'rows-per-second' = '300',
               'number-of-rows' = '3000', 'fields.id.kind' = 'sequence',
               'fields.id.start' = '0', 'fields.id.end' = '2999');
             CREATE TABLE o (k BIGINT, c BIGINT, PRIMARY KEY (k) NOT ENFORCED)
               WITH ('connector' = 'print', 'print-identifier' = '{id}');
             INSERT INTO o SELECT id % 10, COUNT(*) FROM t GROUP BY id % 10;"
        )
    };
    for (ttl, id) in [("2s", "expiring"), ("1h", "kept")] {
        let job_id = cluster.submit(&script(ttl, id), 1);
        let savepoint = stop_with_savepoint(&cluster, &job_id, 2);
        std::thread::sleep(Duration::from_secs(3));
        let resumed = format!("{id}resumed");
        resume_until_finished(
            &cluster,
            &savepoint,
            1,
            &format!("{id}.sql"),
            &script(ttl, &resumed),
        );
    }
    let changes = |id: &str| parse_changes(&cluster.printed_by(id));
    // Kept: the resumed job counts on from the savepoint to 300 rows a key.
    let kept = largest_counts_of(&changes("keptresumed"));
    assert_eq!(kept.len(), 10);
    assert!(kept.values().all(|c| *c == 300), "{kept:?}");
    // Expired: every key starts afresh after the pause, counting only the rows after it.
    let resumed = changes("expiringresumed");
    let before = largest_counts_of(&changes("expiring"));
    // A key's first change after the pause is an insert of a new group there, an update
    // of the restored one here (an upsert sink: no `-U`).
    let first_ops = |changes: &[crate::support::Change]| {
        let mut firsts = BTreeMap::new();
        for change in changes {
            firsts
                .entry(change.fields[0].clone())
                .or_insert(change.op.clone());
        }
        firsts.into_values().collect::<Vec<_>>()
    };
    assert_eq!(first_ops(&resumed), ["+I"; 10]);
    assert_eq!(first_ops(&changes("keptresumed")), ["+U"; 10]);
    let after = largest_counts_of(&resumed);
    for (key, count) in &after {
        assert_eq!(
            count + before[key],
            300,
            "key {key}: {count} after, {} before",
            before[key]
        );
    }
}

/// Per key, the largest count printed.
fn largest_counts_of(changes: &[crate::support::Change]) -> BTreeMap<String, i64> {
    let mut counts = BTreeMap::new();
    for change in changes.iter().filter(|c| c.op == "+I" || c.op == "+U") {
        let count: i64 = change.fields[1].parse().unwrap();
        let entry = counts.entry(change.fields[0].clone()).or_insert(count);
        *entry = (*entry).max(count);
    }
    counts
}
