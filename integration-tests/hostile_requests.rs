//! Requests built to exhaust a stack: SQL long or nested far past the planner's limits,
//! sent to a running JobManager over REST and gRPC and planned by `eddy explain`, a JSON body
//! nested 100 000 deep and a protobuf message of 100 000 nested groups. Each gets a clear
//! error (a SQL one says `line:column`), the JobManager keeps serving, and its memory
//! comes back near where it was.

use std::process::Command;
use std::time::{Duration, Instant};

use crate::http::{post_json, request};
use crate::processes::Cluster;
use crate::support::{Scratch, eddy};

const TABLES: &str = "CREATE TABLE s (a BIGINT, b VARCHAR) WITH ('connector' = 'datagen');
CREATE TABLE o (a BIGINT) WITH ('connector' = 'blackhole');
";

/// Scripts past the limits, each with a word its error must contain.
fn hostile_scripts() -> Vec<(&'static str, String, &'static str)> {
    let insert = |query: String| format!("{TABLES}INSERT INTO o {query};");
    let nested = |depth: usize, wrap: &dyn Fn(String, usize) -> String| {
        (0..depth).fold("a".to_string(), wrap)
    };
    let mut views = String::from(TABLES);
    views.push_str("CREATE VIEW v0 AS SELECT a FROM s;\n");
    for i in 1..1_000 {
        views.push_str(&format!(
            "CREATE VIEW v{i} AS SELECT a + 1 AS a FROM v{};\n",
            i - 1
        ));
    }
    views.push_str("INSERT INTO o SELECT a FROM v999;");
    let mut doubling = String::from(TABLES);
    doubling.push_str("CREATE VIEW w0 AS SELECT a FROM s;\n");
    for i in 1..40 {
        let below = format!("SELECT a FROM w{}", i - 1);
        doubling.push_str(&format!("CREATE VIEW w{i} AS {below} UNION ALL {below};\n"));
    }
    doubling.push_str("INSERT INTO o SELECT a FROM w39;");
    vec![
        (
            "a chain of 100 000 +",
            insert(format!("SELECT {} FROM s", vec!["a"; 100_000].join("+"))),
            "too deep",
        ),
        (
            "300 000 operators",
            insert(format!("SELECT {} FROM s", vec!["1"; 300_000].join("+"))),
            "too long",
        ),
        (
            "10 000 parentheses",
            insert(format!(
                "SELECT {} FROM s",
                nested(10_000, &|e, _| format!("({e})"))
            )),
            "too deep",
        ),
        (
            "5 000 nested CASE",
            insert(format!(
                "SELECT {} FROM s",
                nested(5_000, &|e, i| format!("CASE WHEN a > {i} THEN {e} END"))
            )),
            "too deep",
        ),
        (
            "10 000 NOT",
            insert(format!(
                "SELECT a FROM s WHERE {} a > 0",
                vec!["NOT"; 10_000].join(" ")
            )),
            "too deep",
        ),
        (
            "5 000 nested subqueries",
            insert((0..5_000).fold("SELECT a FROM s".to_string(), |q, _| {
                format!("SELECT a FROM ({q})")
            })),
            "too deep",
        ),
        (
            "5 000 UNION ALL",
            insert(vec!["SELECT a FROM s"; 5_000].join(" UNION ALL ")),
            "too long",
        ),
        (
            "2 000 joins",
            insert(format!(
                "SELECT t0.a FROM s AS t0 {}",
                (1..2_000)
                    .map(|i| format!("JOIN s AS t{i} ON t{i}.a = t0.a"))
                    .collect::<Vec<_>>()
                    .join(" ")
            )),
            "too deep",
        ),
        ("1 000 views on views", views, "too deep"),
        ("views doubling 40 times", doubling, "too large"),
    ]
}

/// Whether `message` names a `line:column`.
fn located(message: &str) -> bool {
    message.split(|c: char| !c.is_ascii_digit() && c != ':').any(|part| {
        let mut numbers = part.split(':').filter(|p| !p.is_empty());
        matches!((numbers.next(), numbers.next()), (Some(l), Some(c)) if l.parse::<u64>().is_ok() && c.parse::<u64>().is_ok())
    })
}

/// Resident memory of a process, in MiB.
fn rss_mib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kib: u64 = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        .unwrap_or(0);
    kib / 1024
}

/// A gRPC `SubmitJob` call with `message` as its body, by curl (HTTP/2 without TLS);
/// returns what curl printed (headers and trailers included).
fn raw_grpc_submit(address: &str, scratch: &Scratch, message: &[u8]) -> String {
    let mut frame = vec![0u8];
    frame.extend_from_slice(&(message.len() as u32).to_be_bytes());
    frame.extend_from_slice(message);
    let body = scratch.path().join("frame.bin");
    std::fs::write(&body, frame).unwrap();
    let output = Command::new("curl")
        .args(["-s", "-i", "--http2-prior-knowledge", "--max-time", "60"])
        .args(["-H", "content-type: application/grpc", "-H", "te: trailers"])
        .arg("--data-binary")
        .arg(format!("@{}", body.display()))
        .arg(format!("{address}/eddy.v1.JobService/SubmitJob"))
        .output()
        .expect("curl is missing (.ci/run installs it)");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn hostile_requests_get_errors_and_the_jobmanager_keeps_serving() {
    let cluster = Cluster::start("hostile-requests", 1, 1);
    let scratch = Scratch::new("hostile-requests");
    let pid = cluster.jobmanager.child.id();
    // Warm up: one script planned over each path.
    let fine = format!("{TABLES}INSERT INTO o SELECT a FROM s WHERE a > 0;");
    let warm = post_json(&cluster.http, "/v1/jobs", &serde_json::json!({"sql": fine}));
    assert_eq!(warm.status, 201, "{}", warm.text());
    let baseline = rss_mib(pid);
    for (what, sql, expected) in hostile_scripts() {
        let started = Instant::now();
        let rest = post_json(&cluster.http, "/v1/jobs", &serde_json::json!({"sql": sql}));
        let message = rest.json()["error"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        assert_eq!(rest.status, 400, "{what} over REST: {}", rest.text());
        assert!(
            message.contains(expected) && located(&message),
            "{what} over REST: {message}"
        );
        let file = scratch.write("hostile.sql", &sql);
        let grpc = cluster.client(&["submit", file.to_str().unwrap()]);
        let error = String::from_utf8_lossy(&grpc.stderr);
        assert!(
            !grpc.status.success() && error.contains(expected),
            "{what} over gRPC: {error}"
        );
        let explain = eddy().arg("explain").arg(&file).output().unwrap();
        let error = String::from_utf8_lossy(&explain.stderr);
        assert_eq!(
            explain.status.code(),
            Some(1),
            "{what} by eddy explain: {error}"
        );
        assert!(
            error.contains(expected) && located(&error),
            "{what} by eddy explain: {error}"
        );
        eprintln!(
            "{what}: refused in {:?}, {} MiB resident",
            started.elapsed(),
            rss_mib(pid)
        );
    }

    // A JSON body nested 100 000 arrays deep.
    let deep_json = format!(
        "{{\"sql\": {}{}}}",
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    let answer = request(
        &cluster.http,
        "POST",
        "/v1/jobs",
        Some(deep_json.as_bytes()),
    );
    assert!(
        matches!(answer.status, 400 | 422),
        "deep JSON: {}",
        answer.text()
    );
    // A protobuf message of 100 000 nested groups of an unknown field.
    let mut groups = vec![(15 << 3 | 3) as u8; 100_000];
    groups.extend(vec![(15 << 3 | 4) as u8; 100_000]);
    let answer = raw_grpc_submit(&cluster.address, &scratch, &groups);
    let status = answer
        .lines()
        .find_map(|l| l.strip_prefix("grpc-status: "))
        .map(str::trim);
    assert!(
        status.is_some_and(|s| s != "0"),
        "nested groups over gRPC: {answer}"
    );

    // Still serving, and the memory planning took is given back.
    let list = cluster.client(&["list"]);
    assert!(
        list.status.success(),
        "{}",
        String::from_utf8_lossy(&list.stderr)
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut now = rss_mib(pid);
    while now > baseline + 64 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(500));
        now = rss_mib(pid);
    }
    eprintln!("resident: {baseline} MiB before, {now} MiB after");
    assert!(
        now <= baseline + 64,
        "{baseline} MiB before, {now} MiB after"
    );
    assert!(cluster.jobmanager.child.id() == pid);
}
