//! Security with real processes on loopback: TLS on every port (mutual inside the cluster),
//! users' tokens, jobs confined by the cluster's policy, and secrets kept out of every
//! store, log and answer.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use crate::postgres::Postgres;
use crate::processes::{Cluster, Daemon, free_port};
use crate::support::{Scratch, eddy};

/// A cluster CA with a node certificate, a certificate from another CA, and two tokens.
pub struct Credentials {
    dir: Scratch,
    /// A read-write token.
    pub admin: String,
    /// A read-only token.
    pub viewer: String,
}

fn run(command: &mut Command) -> Output {
    let output = command.output().expect("start a program");
    assert!(
        output.status.success(),
        "{command:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

impl Credentials {
    /// Makes them with `eddy cert` and `eddy token`.
    pub fn new() -> Credentials {
        let dir = Scratch::new("credentials");
        let path = |p: &str| dir.path().join(p);
        run(eddy().args(["cert", "--out"]).arg(path("ca")).arg("node"));
        run(eddy()
            .args(["cert", "--out"])
            .arg(path("other-ca"))
            .arg("intruder"));
        let token = |name: &str, read_only: bool| {
            let mut command = eddy();
            command
                .args(["token", name, "--append"])
                .arg(path("tokens"));
            if read_only {
                command.arg("--read-only");
            }
            String::from_utf8(run(&mut command).stdout)
                .unwrap()
                .trim()
                .to_string()
        };
        let admin = token("admin", false);
        let viewer = token("viewer", true);
        let file = std::fs::read_to_string(path("tokens")).unwrap();
        assert!(
            !file.contains(&admin) && file.contains("viewer = sha256:"),
            "the token file holds hashes: {file}"
        );
        Credentials { dir, admin, viewer }
    }

    /// A file of theirs.
    pub fn path(&self, name: &str) -> String {
        self.dir.path().join(name).display().to_string()
    }

    /// The environment of a daemon of the cluster: TLS files and the token file.
    pub fn daemon_env(&self) -> Vec<(String, String)> {
        vec![
            ("EDDY_TLS_CERT".into(), self.path("ca/node.pem")),
            ("EDDY_TLS_KEY".into(), self.path("ca/node-key.pem")),
            ("EDDY_TLS_CA".into(), self.path("ca/ca.pem")),
            ("EDDY_TOKEN_FILE".into(), self.path("tokens")),
        ]
    }

    /// The environment of a client presenting `token`.
    pub fn client_env(&self, token: &str) -> Vec<(String, String)> {
        vec![
            ("EDDY_TLS_CA".into(), self.path("ca/ca.pem")),
            ("EDDY_TOKEN".into(), token.to_string()),
        ]
    }
}

fn pairs(env: &[(String, String)]) -> Vec<(&str, &str)> {
    env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect()
}

/// A cluster of `count` TaskManagers with TLS and tokens, its clients using the admin token.
pub fn secured_cluster(
    name: &str,
    credentials: &Credentials,
    count: usize,
    slots: usize,
    env: &[(&str, &str)],
) -> Cluster {
    let daemon = credentials.daemon_env();
    let mut all = pairs(&daemon);
    all.extend_from_slice(env);
    let client = credentials.client_env(&credentials.admin);
    Cluster::start_secured(name, count, slots, &[], &all, &pairs(&client))
}

/// `eddy ARGS` against `address` with exactly `env` (no credentials of the cluster).
fn client(address: &str, env: &[(String, String)], args: &[&str]) -> Output {
    eddy()
        .args(args)
        .env("EDDY_JOBMANAGER", address)
        .env_remove("EDDY_TOKEN")
        .env_remove("EDDY_TLS_CA")
        .envs(env.iter().map(|(k, v)| (k, v)))
        .output()
        .unwrap()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).to_string()
}

/// An HTTPS request with curl, trusting the cluster CA: the status and the body.
fn curl(credentials: &Credentials, method: &str, url: &str, token: Option<&str>) -> (u16, String) {
    let mut command = Command::new("curl");
    command
        .args([
            "-sS",
            "--max-time",
            "10",
            "-X",
            method,
            "-w",
            "\n%{http_code}",
        ])
        .args(["--cacert", &credentials.path("ca/ca.pem")]);
    if let Some(token) = token {
        command.args(["-H", &format!("Authorization: Bearer {token}")]);
    }
    if method == "POST" {
        command.args([
            "-H",
            "content-type: application/json",
            "-d",
            r#"{"sql": "x"}"#,
        ]);
    }
    let output = command
        .arg(url)
        .output()
        .expect("curl (apt-get install curl)");
    let text = String::from_utf8_lossy(&output.stdout).to_string();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
    (code.trim().parse().unwrap_or(0), body.to_string())
}

/// Whether a TLS handshake with the server at `port` succeeds presenting `cert` (or no
/// certificate), as `openssl s_client` sees it.
fn handshake(port: u16, credentials: &Credentials, cert: Option<(&str, &str)>) -> bool {
    let mut command = Command::new("openssl");
    command
        .args(["s_client", "-connect", &format!("127.0.0.1:{port}")])
        .args([
            "-CAfile",
            &credentials.path("ca/ca.pem"),
            "-verify_return_error",
        ]);
    if let Some((cert, key)) = cert {
        command.args([
            "-cert",
            &credentials.path(cert),
            "-key",
            &credentials.path(key),
        ]);
    }
    // Send a byte after the handshake and wait for the server's verdict: a server that
    // refuses the client's certificate sends its alert after the client's Finished.
    let output = command
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write;
            std::thread::sleep(Duration::from_millis(500));
            let _ = child
                .stdin
                .take()
                .unwrap()
                .write_all(b"PRI * HTTP/2.0\r\n\r\n");
            std::thread::sleep(Duration::from_millis(500));
            let _ = child.kill();
            child.wait_with_output()
        })
        .expect("openssl");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let refused = ["alert", "errno", "error:", "Connection refused"]
        .iter()
        .any(|s| text.contains(s));
    !refused && text.contains("Verify return code: 0 (ok)")
}

fn port_of(url: &str) -> u16 {
    url.rsplit(':')
        .next()
        .unwrap()
        .trim_end_matches('/')
        .parse()
        .unwrap()
}

const GROUPS: &str =
    "CREATE TABLE s (id BIGINT) WITH ('connector' = 'datagen', 'rows-per-second' = '0',
       'fields.id.kind' = 'sequence', 'fields.id.start' = '1', 'fields.id.end' = '1000');
     CREATE TABLE o (k BIGINT, c BIGINT) WITH ('connector' = 'print');
     INSERT INTO o SELECT id % 4, COUNT(*) FROM s GROUP BY id % 4;";

#[test]
fn tls_and_tokens_guard_every_port() {
    let credentials = Credentials::new();
    // One slot each: the GROUP BY's two subtasks run on both, so rows cross between them.
    let cluster = secured_cluster("secured", &credentials, 2, 1, &[]);
    let job = cluster.submit(GROUPS, 2);
    cluster.wait_for(&job, "FINISHED", Duration::from_secs(60));
    let printed = cluster.printed();
    for k in 0..4 {
        assert!(
            printed.contains(&format!("[{k}, 250]")),
            "key {k} did not reach 250 over mutual TLS: {printed}"
        );
    }
    let address = cluster.address.clone();
    let ca = ("EDDY_TLS_CA".to_string(), credentials.path("ca/ca.pem"));
    let token = |t: &str| ("EDDY_TOKEN".to_string(), t.to_string());

    // gRPC: plain text, no token, a wrong token, a read-only one.
    let plain = client(&address, &[token(&credentials.admin)], &["list"]);
    assert!(!plain.status.success());
    assert!(stderr(&plain).contains("TLS"), "{}", stderr(&plain));
    let anonymous = client(&address, std::slice::from_ref(&ca), &["list"]);
    assert!(
        stderr(&anonymous).contains("needs a token"),
        "{}",
        stderr(&anonymous)
    );
    let wrong = client(&address, &[ca.clone(), token("eddy_0000")], &["list"]);
    assert!(stderr(&wrong).contains("not valid"), "{}", stderr(&wrong));
    let viewer = [ca.clone(), token(&credentials.viewer)];
    assert!(client(&address, &viewer, &["list"]).status.success());
    assert!(
        client(&address, &viewer, &["status", &job])
            .status
            .success()
    );
    let script = cluster.scratch.write("job.sql", GROUPS);
    let submit = client(&address, &viewer, &["submit", script.to_str().unwrap()]);
    assert!(stderr(&submit).contains("read-only"), "{}", stderr(&submit));
    let cancel = client(&address, &viewer, &["cancel", &job]);
    assert!(stderr(&cancel).contains("read-only"), "{}", stderr(&cancel));

    // HTTPS: the API wants a token, a read-only one only reads; plain HTTP gets nothing.
    let http = format!("https://{}", cluster.http);
    let (status, body) = curl(&credentials, "GET", &format!("{http}/v1/jobs"), None);
    assert_eq!(status, 401, "{body}");
    let (status, body) = curl(
        &credentials,
        "GET",
        &format!("{http}/v1/jobs"),
        Some(&credentials.viewer),
    );
    assert!(status == 200 && body.contains(&job), "{status} {body}");
    let (status, body) = curl(
        &credentials,
        "POST",
        &format!("{http}/v1/jobs"),
        Some(&credentials.viewer),
    );
    assert_eq!(status, 403, "{body}");
    let (status, _) = curl(&credentials, "GET", &format!("{http}/metrics"), None);
    assert_eq!(status, 401);
    let (status, body) = curl(
        &credentials,
        "GET",
        &format!("{http}/metrics"),
        Some(&credentials.viewer),
    );
    assert!(status == 200 && body.contains("eddy_job_state"), "{status}");
    let (status, _) = curl(
        &credentials,
        "GET",
        &format!("http://{}/health", cluster.http),
        None,
    );
    assert_eq!(status, 0, "plain HTTP on the TLS port must fail");
    let (_, taskmanagers) = curl(
        &credentials,
        "GET",
        &format!("{http}/v1/taskmanagers"),
        Some(&credentials.admin),
    );
    let taskmanagers: serde_json::Value = serde_json::from_str(&taskmanagers).unwrap();
    let first = taskmanagers[0].clone();
    let (status, body) = curl(
        &credentials,
        "GET",
        &format!("{}/metrics", first["http_address"].as_str().unwrap()),
        Some(&credentials.viewer),
    );
    assert!(
        status == 200 && body.contains("eddy_task"),
        "a TaskManager's /metrics over TLS: {status}"
    );

    // A TaskManager's gRPC port takes only peers with a certificate of the cluster CA.
    let port = port_of(first["address"].as_str().unwrap());
    assert!(handshake(
        port,
        &credentials,
        Some(("ca/node.pem", "ca/node-key.pem"))
    ));
    assert!(
        !handshake(port, &credentials, None),
        "a peer without a certificate got in"
    );
    assert!(
        !handshake(
            port,
            &credentials,
            Some(("other-ca/intruder.pem", "other-ca/intruder-key.pem"))
        ),
        "a certificate of another CA got in"
    );

    // TaskManagers with another CA's certificate, or none, cannot register.
    let logs = cluster.scratch.path().join("intruders");
    let intruder = |cert: Option<&str>| {
        let mut command = eddy();
        command
            .env("EDDY_LOG", "info")
            .env("EDDY_TEST_STDERR_DIR", &logs)
            .args([
                "taskmanager",
                "--jobmanager",
                &address,
                "--bind",
                "127.0.0.1:0",
            ]);
        if let Some(name) = cert {
            command
                .env(
                    "EDDY_TLS_CERT",
                    credentials.path(&format!("other-ca/{name}.pem")),
                )
                .env(
                    "EDDY_TLS_KEY",
                    credentials.path(&format!("other-ca/{name}-key.pem")),
                )
                .env("EDDY_TLS_CA", credentials.path("ca/ca.pem"));
        }
        Daemon::spawn(command)
    };
    let intruders = [intruder(Some("intruder")), intruder(None)];
    std::thread::sleep(Duration::from_secs(3));
    let (_, listed) = curl(
        &credentials,
        "GET",
        &format!("{http}/v1/taskmanagers"),
        Some(&credentials.admin),
    );
    let listed: serde_json::Value = serde_json::from_str(&listed).unwrap();
    assert_eq!(
        listed.as_array().unwrap().len(),
        2,
        "an intruder registered: {listed}"
    );
    for log in std::fs::read_dir(&logs).unwrap() {
        let text = std::fs::read_to_string(log.unwrap().path()).unwrap();
        assert!(text.contains("cannot register"), "{text}");
    }
    drop(intruders);
}

#[test]
fn daemons_without_tls_and_tokens_keep_to_loopback() {
    let port = free_port().to_string();
    let refused = |args: &[&str]| {
        let output = eddy().args(args).output().unwrap();
        assert!(!output.status.success(), "{args:?} started");
        stderr(&output)
    };
    let error = refused(&["jobmanager", "--bind", &format!("0.0.0.0:{port}")]);
    assert!(
        error.contains("refusing to listen on 0.0.0.0") && error.contains("--insecure"),
        "{error}"
    );
    let error = refused(&["taskmanager", "--bind", &format!("0.0.0.0:{port}")]);
    assert!(error.contains("TLS is not configured"), "{error}");
    let credentials = Credentials::new();
    let output = eddy()
        .args([
            "jobmanager",
            "--bind",
            &format!("0.0.0.0:{port}"),
            "--tls-cert",
        ])
        .arg(credentials.path("ca/node.pem"))
        .args(["--tls-key", &credentials.path("ca/node-key.pem")])
        .args(["--tls-ca", &credentials.path("ca/ca.pem")])
        .output()
        .unwrap();
    assert!(
        stderr(&output).contains("no tokens are configured"),
        "{}",
        stderr(&output)
    );
    let error = refused(&["jobmanager", "--tls-cert", &credentials.path("ca/node.pem")]);
    assert!(error.contains("--tls-key"), "{error}");
    let error = refused(&["jobmanager", "--token-file", "/no/such/tokens"]);
    assert!(error.contains("/no/such/tokens"), "{error}");
}

#[test]
fn jobs_are_confined_to_the_allowed_locations() {
    let scratch = Scratch::new("confined");
    let data = scratch.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    std::os::unix::fs::symlink("/etc", data.join("etc")).unwrap();
    let allowed = format!("--allowed-locations={}", data.display());
    let cluster = Cluster::start_with(
        "confined",
        1,
        2,
        &[
            &allowed,
            "--forbidden-connectors=kafka",
            "--max-parallelism=2",
            "--max-jobs-per-user=1",
        ],
        &[],
    );
    let refused = |script: &str, expected: &str| {
        let file = cluster
            .scratch
            .write(&format!("job-{}.sql", crate::support::unique()), script);
        let output = cluster.client(&["submit", file.to_str().unwrap()]);
        assert!(!output.status.success(), "accepted: {script}");
        let error = stderr(&output);
        assert!(error.contains(expected), "{error}");
        error
    };
    let read = |path: &Path| {
        format!(
            "CREATE TABLE f (line STRING) WITH ('connector' = 'filesystem', 'path' = '{}', 'format' = 'csv');
             CREATE TABLE o (line STRING) WITH ('connector' = 'blackhole');
             INSERT INTO o SELECT line FROM f;",
            path.display()
        )
    };
    let write = |path: &str| {
        format!(
            "CREATE TABLE s (id BIGINT) WITH ('connector' = 'datagen', 'number-of-rows' = '10');
             CREATE TABLE f (id BIGINT) WITH ('connector' = 'filesystem', 'path' = '{path}', 'format' = 'csv');
             INSERT INTO f SELECT id FROM s;"
        )
    };
    refused(&read(Path::new("/etc/passwd")), "'/etc/passwd' is outside");
    refused(&write(&format!("{}/../../x", data.display())), "is outside");
    refused(&read(&data.join("etc/passwd")), "is outside");
    refused(&write("file:///tmp/elsewhere"), "is outside");
    let checkpoints = format!(
        "SET 'execution.checkpointing.interval' = '1s'; SET 'execution.checkpointing.dir' = '/tmp/x';\n{}",
        write(&data.join("out").display().to_string())
    );
    refused(&checkpoints, "execution.checkpointing.dir");
    refused(
        "CREATE TABLE k (id BIGINT) WITH ('connector' = 'kafka', 'topic' = 't',
           'properties.bootstrap.servers' = '127.0.0.1:1', 'format' = 'json');
         CREATE TABLE o (id BIGINT) WITH ('connector' = 'blackhole');
         INSERT INTO o SELECT id FROM k;",
        "the 'kafka' connector is not allowed",
    );
    let wide = format!(
        "SET 'parallelism.default' = '3';\n{}",
        write(&data.join("w").display().to_string())
    );
    refused(&wide, "above the limit of 2");
    let literal =
        "CREATE TABLE s (id BIGINT) WITH ('connector' = 'datagen', 'number-of-rows' = '1');
         CREATE TABLE p (id BIGINT) WITH ('connector' = 'postgres', 'url' = 'postgres://h/db',
           'table' = 't', 'password' = 'hunter2');
         INSERT INTO p SELECT id FROM s;";
    let error = refused(literal, "'${env:NAME}'");
    assert!(!error.contains("hunter2"), "{error}");
    refused(
        &literal.replace("hunter2", "${env:AWS_SECRET_ACCESS_KEY}"),
        "starting with 'EDDY_SECRET_'",
    );

    // Scripts above the size limit: refused by the policy, or before they are read whole.
    let padding = |bytes: usize| {
        format!(
            "-- {}\n{}",
            "x".repeat(bytes),
            write(&data.join("big").display().to_string())
        )
    };
    refused(&padding(1_050_000), "above the limit of 1048576");
    refused(&padding(3_000_000), "too large");

    // Inside the prefix it runs.
    let job = cluster.submit(&write(&data.join("out").display().to_string()), 1);
    cluster.wait_for(&job, "FINISHED", Duration::from_secs(30));
    assert!(data.join("out").exists());
    // One unfinished job per user.
    let unbounded =
        "CREATE TABLE s (id BIGINT) WITH ('connector' = 'datagen', 'rows-per-second' = '10');
         CREATE TABLE o (id BIGINT) WITH ('connector' = 'blackhole');
         INSERT INTO o SELECT id FROM s;";
    let running = cluster.submit(unbounded, 1);
    cluster.wait_for(&running, "RUNNING", Duration::from_secs(30));
    refused(unbounded, "already has 1 unfinished jobs");
}

/// Every file under `dir`, with its path, as text.
fn files_under(dir: &Path) -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if let Ok(bytes) = std::fs::read(&path) {
                out.push((path, String::from_utf8_lossy(&bytes).to_string()));
            }
        }
    }
    out
}

#[test]
fn a_canary_secret_leaks_nowhere() {
    let canary = format!("canary-{}-{}", std::process::id(), crate::support::unique());
    let pg = Postgres::start("canary");
    pg.add_password_user("canary_user", &canary);
    pg.execute("CREATE TABLE canary_out (id BIGINT PRIMARY KEY, c BIGINT); ALTER TABLE canary_out OWNER TO canary_user;");
    let credentials = Credentials::new();
    let logs = Scratch::new("canary-logs");
    let logs_dir = logs.path().display().to_string();
    let cluster = secured_cluster(
        "canary",
        &credentials,
        2,
        1,
        &[
            ("EDDY_SECRET_CANARY", &canary),
            ("EDDY_TEST_STDERR_DIR", &logs_dir),
            (
                "EDDY_LOG",
                "debug,h2=info,tonic=info,hyper=info,tower=info,rustls=info",
            ),
        ],
    );
    let script = |password: &str| {
        format!(
            "SET 'execution.checkpointing.interval' = '200ms';
             CREATE TABLE s (id BIGINT) WITH ('connector' = 'datagen', 'rows-per-second' = '2000',
               'fields.id.kind' = 'sequence', 'fields.id.start' = '1', 'fields.id.end' = '2000');
             CREATE TABLE p (id BIGINT, c BIGINT, PRIMARY KEY (id) NOT ENFORCED) WITH (
               'connector' = 'postgres', 'url' = '{}', 'table' = 'canary_out',
               'username' = 'canary_user', 'password' = '{password}',
               'sink.delivery-guarantee' = 'exactly-once');
             INSERT INTO p SELECT id % 100, COUNT(*) FROM s GROUP BY id % 100;",
            pg.url()
        )
    };
    // Named by reference, the password is read by the TaskManagers, and PostgreSQL takes it.
    let job = cluster.submit(&script("${env:EDDY_SECRET_CANARY}"), 2);
    cluster.wait_for(&job, "FINISHED", Duration::from_secs(60));
    assert_eq!(
        pg.query("SELECT count(*), sum(c) FROM canary_out"),
        [["100", "2000"]]
    );
    // Written out, it is refused, without being echoed.
    let scripts = Scratch::new("canary-scripts");
    let file = scripts.write("literal.sql", &script(&canary));
    let literal = cluster.client(&["submit", file.to_str().unwrap()]);
    assert!(
        stderr(&literal).contains("holds a secret written out"),
        "{}",
        stderr(&literal)
    );
    // Every answer: gRPC and REST, metrics of every daemon.
    let mut answers = vec![];
    for args in [
        vec!["status", job.as_str(), "--output", "json", "--checkpoints"],
        vec!["list", "--output", "json"],
    ] {
        answers.push(String::from_utf8_lossy(&cluster.client(&args).stdout).to_string());
    }
    answers.push(stderr(&literal));
    let http = format!("https://{}", cluster.http);
    let admin = Some(credentials.admin.as_str());
    for path in [
        "/v1/jobs",
        &format!("/v1/jobs/{job}"),
        &format!("/v1/jobs/{job}/checkpoints"),
        "/v1/taskmanagers",
        "/metrics",
    ] {
        answers.push(curl(&credentials, "GET", &format!("{http}{path}"), admin).1);
    }
    let (_, taskmanagers) = curl(
        &credentials,
        "GET",
        &format!("{http}/v1/taskmanagers"),
        admin,
    );
    for tm in serde_json::from_str::<serde_json::Value>(&taskmanagers)
        .unwrap()
        .as_array()
        .unwrap()
    {
        let url = format!("{}/metrics", tm["http_address"].as_str().unwrap());
        answers.push(curl(&credentials, "GET", &url, admin).1);
    }
    let explain = eddy().args(["explain"]).arg(&file).output().unwrap();
    answers.push(String::from_utf8_lossy(&explain.stdout).to_string() + &stderr(&explain));
    for answer in &answers {
        assert!(
            !answer.contains(&canary),
            "an answer shows the secret: {answer}"
        );
    }
    assert!(
        answers.iter().any(|a| a.contains(&job)),
        "the answers were read"
    );
    // Stores (job records, checkpoints and their metadata) and every daemon's log.
    drop(cluster.client(&["list"]));
    let mut seen = files_under(cluster.scratch.path());
    let daemon_logs = files_under(logs.path());
    assert!(daemon_logs.len() >= 3 && daemon_logs.iter().any(|(_, t)| t.contains("job submitted")));
    seen.extend(daemon_logs);
    assert!(
        seen.iter().any(|(p, _)| p.ends_with("job.json")),
        "the job store was read"
    );
    assert!(
        seen.iter().any(|(p, _)| p.ends_with("_metadata")),
        "checkpoints were read"
    );
    for (path, text) in &seen {
        assert!(
            !text.contains(&canary),
            "{} holds the secret",
            path.display()
        );
    }

    // `eddy run` takes the secret written out, and still keeps it out of its job record.
    let local = Scratch::new("canary-run");
    pg.execute("DELETE FROM canary_out");
    let output = eddy()
        .args(["run", "--parallelism", "1"])
        .arg(&file)
        .current_dir(local.path())
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(!stderr(&output).contains(&canary));
    assert_eq!(pg.query("SELECT sum(c) FROM canary_out"), [["2000"]]);
    let records = files_under(local.path());
    assert!(
        records
            .iter()
            .any(|(p, t)| p.ends_with("job.json") && t.contains("'password' = '******'"))
    );
    for (path, text) in &records {
        assert!(
            !text.contains(&canary),
            "{} holds the secret",
            path.display()
        );
    }
}

#[test]
fn five_hundred_idle_connections_do_not_starve_clients() {
    let credentials = Credentials::new();
    let cluster = secured_cluster("slowloris", &credentials, 1, 1, &[]);
    let grpc: std::net::SocketAddr = cluster
        .address
        .trim_start_matches("http://")
        .parse()
        .unwrap();
    let http: std::net::SocketAddr = cluster.http.parse().unwrap();
    // 250 on each port: connected, silent (a TLS handshake never started, or half sent).
    let mut idle = Vec::new();
    for i in 0..500 {
        let target = if i % 2 == 0 { grpc } else { http };
        let mut stream = std::net::TcpStream::connect(target).expect("connect");
        if i % 4 < 2 {
            use std::io::Write;
            // The start of a TLS ClientHello, never finished.
            let _ = stream.write_all(&[0x16, 0x03, 0x01, 0x02, 0x00, 0x01]);
        }
        idle.push(stream);
    }
    let started = std::time::Instant::now();
    let listed = cluster.client(&["list"]);
    assert!(listed.status.success(), "{}", stderr(&listed));
    let (status, _) = curl(
        &credentials,
        "GET",
        &format!("https://{}/v1/jobs", cluster.http),
        Some(&credentials.viewer),
    );
    assert_eq!(status, 200);
    let job = cluster.submit(GROUPS, 1);
    cluster.wait_for(&job, "FINISHED", Duration::from_secs(60));
    eprintln!(
        "with 500 idle connections open: list, REST and a job in {:?}",
        started.elapsed()
    );
    assert_eq!(idle.len(), 500);
}
