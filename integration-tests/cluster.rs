//! A real JobManager and TaskManagers as separate processes on loopback.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use eddy_proto::v1 as pb;
use eddy_proto::v1::job_service_client::JobServiceClient;
use eddy_proto::v1::resource_manager_client::ResourceManagerClient;

use crate::golden::{orders, orders_table, per_customer, windowed, write_orders};
use crate::processes::Cluster;
use crate::row;
use crate::support::{materialize, parse_changes, run_script};

const MINUTE: Duration = Duration::from_secs(60);

/// The TaskManagers that ran subtasks of a job, from its status.
fn taskmanagers_used(status: &serde_json::Value) -> BTreeSet<String> {
    status["vertices"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|v| v["subtasks"].as_array().unwrap().iter())
        .map(|s| s["taskmanager"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn golden_scripts_across_two_taskmanagers_match_the_embedded_run() {
    let cluster = Cluster::start("golden-cluster", 2, 2);
    let data = orders(600);
    write_orders(&cluster.scratch, &data, 4);
    let dir = cluster.scratch.path().display().to_string();
    let cases: Vec<(String, BTreeMap<Vec<String>, usize>)> = vec![
        (
            "CREATE TABLE out (customer STRING, c BIGINT, s BIGINT, lo BIGINT, hi BIGINT, av BIGINT) WITH ('connector' = 'print');
             INSERT INTO out SELECT customer, COUNT(*), SUM(amount), MIN(amount), MAX(amount), AVG(amount) FROM orders GROUP BY customer;"
                .to_string(),
            per_customer(&data, |_| true)
                .into_iter()
                .map(|(k, (c, s, lo, hi))| (row![k, c, s, lo, hi, s / c], 1))
                .collect(),
        ),
        (
            "CREATE TABLE out (ws BIGINT, customer STRING, c BIGINT, hi BIGINT) WITH ('connector' = 'print');
             INSERT INTO out SELECT CAST(window_start AS BIGINT), customer, COUNT(*), MAX(amount)
             FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '10' SECONDS)) GROUP BY window_start, window_end, customer;"
                .to_string(),
            windowed(&data, |t| vec![(t / 10_000 * 10_000, 0)], true)
                .into_iter()
                .map(|((s, _, k), (c, hi))| (row![s, k, c, hi], 1))
                .collect(),
        ),
        (
            "CREATE TABLE out (cnt BIGINT, n BIGINT) WITH ('connector' = 'print');
             INSERT INTO out SELECT cnt, COUNT(*) FROM (SELECT customer, COUNT(*) AS cnt FROM orders WHERE id <= 60 GROUP BY customer) GROUP BY cnt;"
                .to_string(),
            {
                let mut by_count: BTreeMap<i64, usize> = BTreeMap::new();
                for (_, g) in per_customer(&data, |o| o.id <= 60) {
                    *by_count.entry(g.0).or_default() += 1;
                }
                by_count.into_iter().map(|(c, n)| (row![c, n], 1)).collect()
            },
        ),
    ];
    for (case, (query, expected)) in cases.into_iter().enumerate() {
        // Each case prints with its own identifier, to tell its lines apart.
        let query = query.replace(
            "'connector' = 'print'",
            &format!("'connector' = 'print', 'print-identifier' = 'case{case}'"),
        );
        let script = format!("{}{query}", orders_table("1")).replace("$DIR", &dir);
        let job = cluster.submit(&script, 4);
        let status = cluster.wait_for(&job, "FINISHED", MINUTE);
        assert_eq!(
            taskmanagers_used(&status).len(),
            2,
            "both TaskManagers ran subtasks: {status}"
        );
        // The TaskManagers' output reaches the test a little after the job ends.
        let deadline = Instant::now() + Duration::from_secs(10);
        let got = loop {
            let prefix = format!("case{case}:");
            let lines: Vec<String> = cluster
                .printed()
                .lines()
                .filter(|l| l.starts_with(&prefix))
                .map(str::to_string)
                .collect();
            let got = materialize(&parse_changes(&lines.join("\n")));
            if got == expected || Instant::now() > deadline {
                break got;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        assert_eq!(got, expected, "distributed result of:\n{query}");
        let embedded = run_script(&cluster.scratch, &script, 4);
        assert_eq!(
            materialize(&parse_changes(&String::from_utf8_lossy(&embedded.stdout))),
            expected
        );
    }
}

#[test]
fn a_slow_sink_holds_the_source_back_and_memory_stays_bounded() {
    let cluster = Cluster::start("backpressure", 2, 2);
    let script = "SET 'table.exec.mini-batch.size' = '500';
         CREATE TABLE t (id BIGINT, k AS id % 97) WITH ('connector' = 'datagen', 'rows-per-second' = '0',
           'fields.id.kind' = 'sequence', 'fields.id.start' = '1', 'fields.id.end' = '1000000000');
         CREATE TABLE o (k BIGINT, c BIGINT) WITH ('connector' = 'blackhole', 'rows-per-second' = '2000');
         INSERT INTO o SELECT k, COUNT(*) FROM t GROUP BY k;";
    let job = cluster.submit(script, 2);
    cluster.wait_for(&job, "RUNNING", MINUTE);
    std::thread::sleep(Duration::from_secs(4));
    let status = cluster.status(&job);
    let vertices = status["vertices"].as_array().unwrap();
    let sum = |v: &serde_json::Value, field: &str| -> u64 {
        v["subtasks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s[field].as_u64().unwrap())
            .sum()
    };
    let read = sum(&vertices[0], "records_in");
    let aggregated = sum(&vertices[1], "records_in");
    // The aggregate takes in whatever arrives, so its input tracks the source; the sink
    // behind it is the slow part: the aggregate's output is throttled to 2000 rows/s per
    // subtask, and everything upstream must wait for it.
    let written = sum(&vertices[1], "records_out");
    eprintln!(
        "backpressure after 4 s: source read {read}, aggregate took {aggregated}, sink wrote {written}"
    );
    assert!(
        written > 0 && written < 2 * 2000 * 8,
        "the sink is throttled: {written}"
    );
    assert!(
        read < 2_000_000,
        "the source was held back by backpressure, yet it read {read} rows: {status}"
    );
    assert!(
        read.saturating_sub(aggregated) < 200_000,
        "rows in flight stay bounded: read {read}, aggregated {aggregated}"
    );
    for (name, daemon) in std::iter::once(("jobmanager", &cluster.jobmanager))
        .chain(cluster.taskmanagers.iter().map(|t| ("taskmanager", t)))
    {
        let rss = daemon.rss_kib();
        eprintln!("{name} RSS: {rss} KiB");
        assert!(rss > 0 && rss < 300 * 1024, "{name} uses {rss} KiB");
    }
    let output = cluster.client(&["cancel", &job]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn cancel_frees_slots_and_a_waiting_job_starts_when_a_taskmanager_joins() {
    let mut cluster = Cluster::start("slots", 2, 1);
    let unbounded =
        "CREATE TABLE t (id BIGINT) WITH ('connector' = 'datagen', 'rows-per-second' = '100');
         CREATE TABLE o (id BIGINT) WITH ('connector' = 'blackhole');
         INSERT INTO o SELECT id FROM t;";
    let running = cluster.submit(unbounded, 2);
    cluster.wait_for(&running, "RUNNING", MINUTE);
    let waiting = cluster.submit(
        "CREATE TABLE t (id BIGINT) WITH ('connector' = 'datagen', 'number-of-rows' = '1000', 'rows-per-second' = '0');
         CREATE TABLE o (id BIGINT) WITH ('connector' = 'blackhole');
         INSERT INTO o SELECT id FROM t;",
        3,
    );
    let status = cluster.status(&waiting);
    assert_eq!(status["state"], "CREATED");
    assert!(
        status["reason"]
            .as_str()
            .unwrap()
            .contains("waiting for slots: needs 3"),
        "{status}"
    );
    let output = cluster.client(&["cancel", &running]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    cluster.wait_for(&running, "CANCELLED", MINUTE);
    // Two slots are free again, but the waiting job needs three.
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(cluster.status(&waiting)["state"], "CREATED");
    cluster.add_taskmanager(1);
    let done = cluster.wait_for(&waiting, "FINISHED", MINUTE);
    assert_eq!(taskmanagers_used(&done).len(), 3);
    let list = cluster.client(&["list"]);
    let listed = String::from_utf8_lossy(&list.stdout);
    assert!(
        listed.contains(&running) && listed.contains("CANCELLED"),
        "{listed}"
    );
}

fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(future)
}

#[test]
fn bad_requests_are_rejected_and_the_jobmanager_keeps_serving() {
    let cluster = Cluster::start("bad-input", 1, 1);
    let address = cluster.address.clone();
    block_on(async {
        let mut jobs = JobServiceClient::connect(address.clone()).await.unwrap();
        let error = jobs
            .submit_job(pb::SubmitJobRequest {
                sql: "CREATE TABLE t (id BIGINT) WITH ('connector' = 'datagen');\nINSERT INTO t SELEC id FROM t;".into(),
                                options: Default::default(),
                restore_path: String::new(),
            })
            .await
            .unwrap_err();
        assert_eq!(error.code(), tonic::Code::InvalidArgument);
        assert!(error.message().contains("2:"), "{}", error.message());
        let mut resources = ResourceManagerClient::connect(address.clone())
            .await
            .unwrap();
        let error = resources
            .heartbeat(pb::HeartbeatRequest {
                taskmanager_id: "intruder".into(),
                tasks: vec![],
            })
            .await
            .unwrap_err();
        assert_eq!(error.code(), tonic::Code::NotFound);
        let error = resources
            .report_task_state(pb::TaskStateReport {
                taskmanager_id: "intruder".into(),
                task: Some(pb::TaskId {
                    execution_id: "x".into(),
                    vertex: 0,
                    subtask: 0,
                }),
                state: pb::TaskState::Finished as i32,
                ..Default::default()
            })
            .await
            .unwrap_err();
        assert_eq!(error.code(), tonic::Code::NotFound);
    });
    // Garbage, and an HTTP/2 preface followed by a truncated frame.
    let port = address.rsplit(':').next().unwrap();
    for bytes in [
        &b"\x00\xffthis is not grpc\r\n\r\n"[..],
        &b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x40\x01\x04"[..],
    ] {
        let mut stream = TcpStream::connect(format!("127.0.0.1:{port}")).unwrap();
        stream.write_all(bytes).unwrap();
        drop(stream);
    }
    let output = cluster.client(&["list"]);
    assert!(
        output.status.success(),
        "the JobManager still serves: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn invalid_sql_and_an_unreachable_jobmanager_give_one_line_errors() {
    let cluster = Cluster::start("cli-errors", 1, 1);
    let file = cluster.scratch.write(
        "bad.sql",
        "CREATE TABLE t (id BIGINT) WITH ('connector' = 'datagen');\nCREATE TABLE o (id BIGINT) WITH ('connector' = 'print');\nINSERT INTO o SELECT idd FROM t;",
    );
    let output = cluster.client(&["submit", &file.display().to_string()]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr.contains("3:22") && stderr.contains("idd"),
        "{stderr}"
    );
    let output = crate::support::eddy()
        .args([
            "list",
            "--jobmanager",
            &format!("http://127.0.0.1:{}", crate::processes::free_port()),
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("cannot reach the JobManager"), "{stderr}");
}

#[test]
fn sigterm_stops_the_daemons_cleanly() {
    let mut cluster = Cluster::start("sigterm", 1, 1);
    let job = cluster.submit(
        "CREATE TABLE t (id BIGINT) WITH ('connector' = 'datagen', 'rows-per-second' = '100');
         CREATE TABLE o (id BIGINT) WITH ('connector' = 'blackhole');
         INSERT INTO o SELECT id FROM t;",
        1,
    );
    cluster.wait_for(&job, "RUNNING", MINUTE);
    let status = cluster.taskmanagers[0].terminate(Duration::from_secs(10));
    assert!(status.success(), "taskmanager exit: {status:?}");
    // The JobManager learns the tasks were cancelled (or, failing that, that the
    // TaskManager went silent) and the job does not stay running.
    let deadline = Instant::now() + MINUTE;
    loop {
        let state = cluster.status(&job)["state"].as_str().unwrap().to_string();
        if state == "FAILED" || state == "CANCELLED" {
            break;
        }
        assert!(Instant::now() < deadline, "job still {state}");
        std::thread::sleep(Duration::from_millis(50));
    }
    let status = cluster.jobmanager.terminate(Duration::from_secs(10));
    assert!(status.success(), "jobmanager exit: {status:?}");
}
