//! Watching a running job: Prometheus scraping every daemon, the REST API, the dashboard in
//! a real headless Chromium, and backpressure as the tasks measure it.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::http::{get_json, post_json, request};
use crate::processes::{Cluster, Daemon, free_port};
use crate::support::{eddy, explain_ok};

const MINUTE: Duration = Duration::from_secs(60);

/// A checkpointing Nexmark job: bids counted per auction (two vertices, a hash exchange).
const NEXMARK_COUNTS: &str = "SET 'execution.checkpointing.interval' = '1s';
    CREATE TABLE bid (auction BIGINT, bidder BIGINT, price BIGINT, dateTime TIMESTAMP(3),
      WATERMARK FOR dateTime AS dateTime - INTERVAL '4' SECOND
    ) WITH ('connector' = 'nexmark', 'nexmark.table' = 'bid', 'events.rate' = '20000');
    CREATE TABLE counts (auction BIGINT, bids BIGINT) WITH ('connector' = 'blackhole');
    INSERT INTO counts SELECT auction, COUNT(*) FROM bid GROUP BY auction;";

/// Fails loudly when a tool the test needs is missing (`.ci/run` installs it).
fn require(tool: &str, package: &str) {
    let found = Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        found,
        "`{tool}` is missing: apt-get install {package} (.ci/run installs it)"
    );
}

/// Waits until `check` gives a value, or fails with what it last saw.
fn eventually<T>(what: &str, within: Duration, mut check: impl FnMut() -> Result<T, String>) -> T {
    let deadline = Instant::now() + within;
    loop {
        match check() {
            Ok(value) => return value,
            Err(seen) if Instant::now() > deadline => panic!("{what}: {seen}"),
            Err(_) => std::thread::sleep(Duration::from_millis(300)),
        }
    }
}

/// The HTTP ports (`host:port`) of the cluster's TaskManagers, as they registered them.
fn taskmanager_ports(cluster: &Cluster) -> Vec<String> {
    get_json(&cluster.http, "/v1/taskmanagers")
        .as_array()
        .unwrap()
        .iter()
        .map(|tm| {
            tm["http_address"]
                .as_str()
                .unwrap()
                .trim_start_matches("http://")
                .to_string()
        })
        .collect()
}

/// Submits a script over REST; returns the job id.
fn submit(cluster: &Cluster, sql: &str, parallelism: usize) -> String {
    let body = json!({"sql": sql, "options": {"parallelism.default": parallelism.to_string()}});
    let answer = post_json(&cluster.http, "/v1/jobs", &body);
    assert_eq!(answer.status, 201, "{}", answer.text());
    answer.json()["id"].as_str().unwrap().to_string()
}

fn completed_checkpoints(job: &Value) -> usize {
    job["checkpoints"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["state"] == "completed")
        .count()
}

fn percent_encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// A Prometheus query's result vector as (labels, value).
fn query(prometheus: &str, promql: &str) -> Vec<(Value, f64)> {
    let answer = get_json(
        prometheus,
        &format!("/api/v1/query?query={}", percent_encode(promql)),
    );
    answer["data"]["result"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["metric"].clone(),
                r["value"][1].as_str().unwrap().parse().unwrap(),
            )
        })
        .collect()
}

#[test]
fn prometheus_scrapes_every_daemon_and_sees_rates_and_checkpoints() {
    require("prometheus", "prometheus");
    require("promtool", "prometheus");
    let cluster = Cluster::start("prometheus", 2, 1);
    let job = submit(&cluster, NEXMARK_COUNTS, 2);
    let mut targets = vec![cluster.http.clone()];
    targets.extend(taskmanager_ports(&cluster));
    assert_eq!(targets.len(), 3);
    eventually("checkpoints complete", MINUTE, || {
        let status = get_json(&cluster.http, &format!("/v1/jobs/{job}"));
        (completed_checkpoints(&status) >= 1)
            .then_some(())
            .ok_or(status.to_string())
    });
    for target in &targets {
        let answer = request(target, "GET", "/metrics", None);
        assert_eq!(answer.status, 200);
        assert!(
            answer
                .header("content-type")
                .unwrap()
                .starts_with("text/plain; version=0.0.4")
        );
        let mut promtool = Command::new("promtool")
            .args(["check", "metrics"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        promtool
            .stdin
            .take()
            .unwrap()
            .write_all(&answer.body)
            .unwrap();
        let checked = promtool.wait_with_output().unwrap();
        assert!(
            checked.status.success(),
            "promtool rejects {target}/metrics: {}{}\n{}",
            String::from_utf8_lossy(&checked.stdout),
            String::from_utf8_lossy(&checked.stderr),
            answer.text()
        );
    }
    let port = free_port();
    let config = format!(
        "global: {{scrape_interval: 1s, evaluation_interval: 1s}}\n\
         scrape_configs:\n  - job_name: eddy\n    static_configs:\n      - targets: {targets:?}\n"
    );
    let config_file = cluster.scratch.write("prometheus.yml", &config);
    let mut command = Command::new("prometheus");
    command.args([
        &format!("--config.file={}", config_file.display()),
        &format!(
            "--storage.tsdb.path={}",
            cluster.scratch.path().join("tsdb").display()
        ),
        &format!("--web.listen-address=127.0.0.1:{port}"),
    ]);
    let _prometheus = Daemon::spawn(command);
    let prometheus = format!("127.0.0.1:{port}");
    eventually("Prometheus listens", MINUTE, || {
        std::net::TcpStream::connect(&prometheus).map_err(|e| e.to_string())
    });
    let rates = eventually("every vertex has a positive output rate", MINUTE, || {
        let up = query(&prometheus, "up");
        let rates = query(
            &prometheus,
            "sum by (vertex) (rate(eddy_task_records_out_total[5s]))",
        );
        let positive: Vec<&str> = rates
            .iter()
            .filter(|(_, v)| *v > 0.0)
            .map(|(m, _)| m["vertex"].as_str().unwrap_or(""))
            .collect();
        match up.len() == 3 && up.iter().all(|(_, v)| *v == 1.0) && positive.len() == 2 {
            true => Ok(rates),
            false => Err(format!("up {up:?}, rates {rates:?}")),
        }
    });
    eprintln!("rates by vertex: {rates:?}");
    let checkpoint = |promql: &str| {
        query(&prometheus, promql)
            .first()
            .map(|(_, v)| *v)
            .unwrap_or(0.0)
    };
    let id = &format!("eddy_job_last_completed_checkpoint_id{{job_id=\"{job}\"}}");
    let first = eventually("a completed checkpoint id", MINUTE, || {
        Some(checkpoint(id))
            .filter(|v| *v > 0.0)
            .ok_or("none".to_string())
    });
    eventually("the completed checkpoint id rises", MINUTE, || {
        let now = checkpoint(id);
        (now > first)
            .then_some(())
            .ok_or(format!("{first} -> {now}"))
    });
    // The cluster's probe job ran before (finished, no checkpoints); this one runs.
    let completed = checkpoint(&format!(
        "eddy_job_checkpoints_total{{job_id=\"{job}\",result=\"completed\"}}"
    ));
    assert!(completed >= 2.0, "{completed}");
    assert_eq!(
        checkpoint(&format!(
            "eddy_job_state{{job_id=\"{job}\",state=\"running\"}}"
        )),
        1.0
    );
    assert_eq!(checkpoint("sum(eddy_job_state{state=\"finished\"})"), 1.0);
}

#[test]
fn the_rest_api_submits_watches_savepoints_stops_and_cancels() {
    let cluster = Cluster::start("rest", 1, 2);
    let http = &cluster.http;
    // Bad input answers with the status that fits and a JSON error.
    let bad = post_json(
        http,
        "/v1/jobs",
        &json!({"sql": "INSERT INTO nowhere\nSELEC 1"}),
    );
    assert_eq!(bad.status, 400, "{}", bad.text());
    let message = bad.json()["error"].as_str().unwrap().to_string();
    assert!(
        message.contains("2:"),
        "bad SQL says line:column: {message}"
    );
    let unknown = request(http, "GET", "/v1/jobs/no-such-job", None);
    assert_eq!(unknown.status, 404);
    assert_eq!(unknown.json()["status"], 404);
    assert_eq!(
        request(http, "DELETE", "/v1/jobs/no-such-job", None).status,
        404
    );
    let huge = json!({"sql": "x".repeat(2 << 20)});
    let too_large = post_json(http, "/v1/jobs", &huge);
    assert_eq!(too_large.status, 413, "{}", too_large.text());
    assert!(too_large.json()["error"].is_string());
    let not_json = request(http, "POST", "/v1/jobs", Some(b"{\"sql\": "));
    assert_eq!(not_json.status, 400, "{}", not_json.text());
    let wrong_type = request(http, "POST", "/v1/jobs", Some(b"{\"sql\": 3}"));
    assert_eq!(wrong_type.status, 422, "{}", wrong_type.text());
    assert_eq!(request(http, "GET", "/v1/nothing-here", None).status, 404);

    // Submit, list, get, checkpoints, savepoint.
    let job = submit(&cluster, NEXMARK_COUNTS, 2);
    let jobs = get_json(http, "/v1/jobs");
    assert!(
        jobs.as_array()
            .unwrap()
            .iter()
            .any(|j| j["id"] == job.as_str())
    );
    let detail = eventually("the job runs and checkpoints", MINUTE, || {
        let detail = get_json(http, &format!("/v1/jobs/{job}"));
        (detail["state"] == "running" && completed_checkpoints(&detail) >= 1)
            .then_some(detail.clone())
            .ok_or(detail.to_string())
    });
    assert_eq!(detail["vertices"].as_array().unwrap().len(), 2);
    assert_eq!(detail["edges"][0]["partitioning"], "hash(bid.auction)");
    assert!(detail["plan"].as_str().unwrap().contains("GroupAggregate"));
    let checkpoints = get_json(http, &format!("/v1/jobs/{job}/checkpoints"));
    assert!(checkpoints[0]["duration_ms"].is_u64() && checkpoints[0]["acks"].is_array());
    let savepoint = request(http, "POST", &format!("/v1/jobs/{job}/savepoints"), None);
    assert_eq!(savepoint.status, 200, "{}", savepoint.text());
    let path = savepoint.json()["path"].as_str().unwrap().to_string();
    assert!(
        std::path::Path::new(&path).join("_metadata").exists(),
        "{path}"
    );

    // Stop with a savepoint: the job ends, and resumes from it.
    let stopped = request(http, "POST", &format!("/v1/jobs/{job}/stop"), None);
    assert_eq!(stopped.status, 200, "{}", stopped.text());
    let stop_path = stopped.json()["savepoint_path"]
        .as_str()
        .unwrap()
        .to_string();
    eventually("the stopped job ends", MINUTE, || {
        let state = get_json(http, &format!("/v1/jobs/{job}"))["state"].clone();
        (state == "cancelled" || state == "finished")
            .then_some(())
            .ok_or(state.to_string())
    });
    let resumed = post_json(
        http,
        "/v1/jobs",
        &json!({"sql": NEXMARK_COUNTS, "restore_path": stop_path}),
    );
    assert_eq!(resumed.status, 201, "{}", resumed.text());
    let resumed = resumed.json()["id"].as_str().unwrap().to_string();
    eventually("the resumed job runs", MINUTE, || {
        let detail = get_json(http, &format!("/v1/jobs/{resumed}"));
        (detail["state"] == "running")
            .then_some(())
            .ok_or(detail["state"].to_string())
    });
    // A second stop of the ended job is a conflict.
    assert_eq!(
        request(http, "POST", &format!("/v1/jobs/{job}/stop"), None).status,
        409
    );

    // Cancel.
    let cancelled = request(http, "DELETE", &format!("/v1/jobs/{resumed}"), None);
    assert_eq!(cancelled.status, 204, "{}", cancelled.text());
    eventually("the cancelled job ends", MINUTE, || {
        let state = get_json(http, &format!("/v1/jobs/{resumed}"))["state"].clone();
        (state == "cancelled")
            .then_some(())
            .ok_or(state.to_string())
    });
    let timeline: Vec<String> = get_json(http, &format!("/v1/jobs/{resumed}"))["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["state"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        timeline,
        ["created", "running", "cancelled"],
        "{timeline:?}"
    );
    assert_eq!(get_json(http, "/v1/taskmanagers")[0]["free_slots"], 2);
    // Without high availability the one JobManager leads, in term 0.
    let leader = get_json(http, "/v1/leader");
    assert_eq!(leader["high_availability"], false, "{leader}");
    assert_eq!(leader["term"], 0, "{leader}");

    // The OpenAPI document is valid OpenAPI and lists every route.
    let openapi = request(http, "GET", "/v1/openapi.json", None);
    assert_eq!(openapi.status, 200);
    let document = openapi.json();
    for path in [
        "/v1/jobs",
        "/v1/jobs/{id}",
        "/v1/jobs/{id}/checkpoints",
        "/v1/jobs/{id}/savepoints",
        "/v1/jobs/{id}/stop",
        "/v1/taskmanagers",
        "/v1/leader",
    ] {
        assert!(
            document["paths"][path].is_object(),
            "{path} missing from the OpenAPI document"
        );
    }
    let file = cluster.scratch.write("openapi.json", &openapi.text());
    let validated = Command::new("python3")
        .args(["-m", "openapi_spec_validator", &file.display().to_string()])
        .output()
        .unwrap();
    assert!(
        validated.status.success(),
        "the OpenAPI document does not validate (pip install openapi-spec-validator; .ci/run does): {}{}",
        String::from_utf8_lossy(&validated.stdout),
        String::from_utf8_lossy(&validated.stderr)
    );
}

#[test]
fn backpressure_shows_on_the_vertex_before_a_slow_sink() {
    let cluster = Cluster::start("backpressure-metrics", 1, 1);
    let script = "CREATE TABLE t (id BIGINT, k AS id % 97) WITH ('connector' = 'datagen', 'rows-per-second' = '0',
           'fields.id.kind' = 'sequence', 'fields.id.start' = '1', 'fields.id.end' = '1000000000');
         CREATE TABLE o (k BIGINT, c BIGINT) WITH ('connector' = 'blackhole', 'rows-per-second' = '2000');
         INSERT INTO o SELECT k, COUNT(*) FROM t GROUP BY k;";
    let job = submit(&cluster, script, 1);
    let vertices = eventually("the source vertex is backpressured", MINUTE, || {
        let detail = get_json(&cluster.http, &format!("/v1/jobs/{job}"));
        let vertices = detail["vertices"].clone();
        let bp = |v: usize| {
            vertices[v]["metrics"]["backpressured_ratio"]
                .as_f64()
                .unwrap_or(0.0)
        };
        (bp(0) > 0.5)
            .then_some(vertices.clone())
            .ok_or(vertices.to_string())
    });
    let sink = vertices[1]["metrics"]["backpressured_ratio"]
        .as_f64()
        .unwrap();
    assert!(
        sink < 0.05,
        "the slow sink itself is not backpressured: {sink}"
    );
    let sink_busy = vertices[1]["metrics"]["busy_ratio"].as_f64().unwrap();
    assert!(sink_busy > 0.5, "the slow sink is busy: {sink_busy}");
    // The TaskManager's counters say the same: over two seconds, the source vertex spent
    // more than half of the time blocked, the sink vertex almost none.
    let tm = &taskmanager_ports(&cluster)[0];
    let blocked = |vertex: &str| -> f64 {
        let text = request(tm, "GET", "/metrics", None).text();
        text.lines()
            .filter(|l| l.starts_with("eddy_task_backpressured_seconds_total{"))
            .filter(|l| l.contains(&format!("vertex=\"{vertex}\"")))
            .map(|l| l.rsplit(' ').next().unwrap().parse::<f64>().unwrap())
            .sum()
    };
    let (source_before, sink_before) = (blocked("v0"), blocked("v1"));
    std::thread::sleep(Duration::from_secs(2));
    let source_share = (blocked("v0") - source_before) / 2.0;
    let sink_share = (blocked("v1") - sink_before) / 2.0;
    eprintln!("backpressure: source {source_share:.2}, sink {sink_share:.2}");
    assert!(source_share > 0.5, "{source_share}");
    assert!(sink_share < 0.05, "{sink_share}");
}

/// A WebDriver session in a headless Chromium, through chromedriver.
struct Browser {
    driver: String,
    session: String,
    _chromedriver: Daemon,
}

impl Browser {
    fn start() -> Browser {
        require("chromedriver", "chromium-driver");
        require("chromium", "chromium");
        let port = free_port();
        let mut command = Command::new("chromedriver");
        command.arg(format!("--port={port}"));
        let chromedriver = Daemon::spawn(command);
        let driver = format!("127.0.0.1:{port}");
        let capabilities = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": "/usr/bin/chromium",
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1400,1600"]},
            "goog:loggingPrefs": {"browser": "ALL"}
        }}});
        eventually("chromedriver listens", MINUTE, || {
            std::net::TcpStream::connect(&driver).map_err(|e| e.to_string())
        });
        let answer = post_json(&driver, "/session", &capabilities);
        assert_eq!(
            answer.status,
            200,
            "no WebDriver session: {}",
            answer.text()
        );
        let session = answer.json()["value"]["sessionId"]
            .as_str()
            .unwrap()
            .to_string();
        Browser {
            driver,
            session,
            _chromedriver: chromedriver,
        }
    }

    fn call(&self, method: &str, path: &str, body: Value) -> Value {
        let path = format!("/session/{}{path}", self.session);
        let body = body.to_string();
        let answer = request(&self.driver, method, &path, Some(body.as_bytes()));
        assert_eq!(answer.status, 200, "{method} {path}: {}", answer.text());
        answer.json()["value"].clone()
    }

    fn script(&self, script: &str) -> Value {
        self.call(
            "POST",
            "/execute/sync",
            json!({"script": script, "args": []}),
        )
    }

    /// Clicks the element with `id` (found afresh: the page redraws itself every two
    /// seconds, so a WebDriver element reference would go stale).
    fn click(&self, id: &str) {
        let clicked = self.script(&format!(
            "const e = document.getElementById('{id}'); if (!e || e.disabled) return false; e.click(); return true"
        ));
        assert_eq!(clicked, true, "no enabled #{id} to click");
    }

    /// What the page logged as errors.
    fn console_errors(&self) -> Vec<Value> {
        let logs = self.call("POST", "/se/log", json!({"type": "browser"}));
        logs.as_array()
            .unwrap()
            .iter()
            .filter(|entry| entry["level"] == "SEVERE")
            .cloned()
            .collect()
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = request(
            &self.driver,
            "DELETE",
            &format!("/session/{}", self.session),
            None,
        );
    }
}

#[test]
#[ignore = "tier browser: drives the dashboard in headless Chromium (needs chromium and chromedriver); .ci/run runs the tier"]
fn the_dashboard_shows_a_running_job_in_chromium_and_takes_a_savepoint() {
    let cluster = Cluster::start("dashboard", 2, 1);
    let script = cluster.scratch.write(
        "counts.sql",
        &format!("SET 'parallelism.default' = '2';\n{NEXMARK_COUNTS}"),
    );
    let explained = explain_ok(&script);
    let descriptions: Vec<String> = explained
        .lines()
        .filter(|l| l.contains("changelog="))
        .map(|l| l.trim().split("  changelog=").next().unwrap().to_string())
        .collect();
    assert!(descriptions.len() >= 5, "{explained}");
    let job = submit(&cluster, NEXMARK_COUNTS, 2);
    let browser = Browser::start();
    let url = format!("http://{}/#/jobs/{job}", cluster.http);
    browser.call("POST", "/url", json!({"url": url}));
    let text = eventually(
        "the job page shows rates and a completed checkpoint",
        MINUTE,
        || {
            let seen = browser.script(
                "return {
               text: document.body.innerText,
               rates: [...document.querySelectorAll('.rate-out')].map(e => e.textContent),
               completed: document.querySelectorAll('tr.checkpoint[data-state=completed]').length,
               vertices: document.querySelectorAll('svg g.vertex').length }",
            );
            let rates_positive = seen["rates"]
                .as_array()
                .is_some_and(|r| !r.is_empty() && r.iter().all(|v| v != "0"));
            match rates_positive && seen["completed"].as_u64() >= Some(1) && seen["vertices"] == 2 {
                true => Ok(seen["text"].as_str().unwrap().to_string()),
                false => Err(seen.to_string()),
            }
        },
    );
    for description in &descriptions {
        assert!(
            text.contains(description.as_str()),
            "the page lacks '{description}' of eddy explain:\n{text}"
        );
    }
    browser.click("savepoint");
    let shown = eventually("the savepoint's path is shown", MINUTE, || {
        let shown = browser.script(
            "const e = document.getElementById('savepoint-path'); return e ? e.textContent : ''",
        );
        let shown = shown.as_str().unwrap_or("").to_string();
        shown
            .starts_with("Savepoint: /")
            .then_some(shown.clone())
            .ok_or(shown)
    });
    let path = shown.trim_start_matches("Savepoint: ");
    assert!(
        std::path::Path::new(path).join("_metadata").exists(),
        "{shown}"
    );
    // The list page renders too.
    browser.call(
        "POST",
        "/url",
        json!({"url": format!("http://{}/#/", cluster.http)}),
    );
    eventually(
        "the job list shows the job and both TaskManagers",
        MINUTE,
        || {
            let rows = browser.script(&format!(
            "return [[...document.querySelectorAll('tr.job')].filter(r => r.textContent.includes('{job}')).length,
                     document.querySelectorAll('tr.taskmanager').length]"
        ));
            (rows == json!([1, 2]))
                .then_some(())
                .ok_or(rows.to_string())
        },
    );
    let errors = browser.console_errors();
    assert!(errors.is_empty(), "console errors: {errors:?}");
    let cancelled = eddy()
        .args(["cancel", &job])
        .env("EDDY_JOBMANAGER", &cluster.address)
        .output()
        .unwrap();
    assert!(cancelled.status.success());
}
