//! The docker-compose cluster of `deploy/` under container-level faults: a TaskManager
//! container killed, the leading JobManager container killed (the standby takes over) and
//! restarted, a TaskManager cut off the network past the heartbeat timeout, and a rescale
//! through a savepoint. Each run of
//! an exactly-once job into the cluster's PostgreSQL must end exactly equal to a
//! failure-free run. Where Docker is not available the tests say so once and pass.

use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::{MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use crate::postgres::{answers_at, query_at};
use crate::processes::{client_at, free_port, status_at, submit_at, wait_for_at};
use crate::support::{Scratch, exclusive, run_ok};

const FOUR_MINUTES: Duration = Duration::from_secs(240);

fn repository() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn run(command: &mut Command) -> Output {
    command.output().expect("run a docker command")
}

/// The compose command: `docker compose` or `docker-compose`.
fn compose_program() -> Option<Vec<&'static str>> {
    let plugin = Command::new("docker").args(["compose", "version"]).output();
    if plugin.is_ok_and(|o| o.status.success()) {
        return Some(vec!["docker", "compose"]);
    }
    let standalone = Command::new("docker-compose").arg("version").output();
    standalone
        .is_ok_and(|o| o.status.success())
        .then(|| vec!["docker-compose"])
}

/// Builds the images once and runs the Docker tests one at a time (each starts a whole
/// cluster), apart from the other heavy tests. Without Docker and Compose the tests fail,
/// saying so: they are never skipped in silence.
fn exclusive_docker() -> MutexGuard<'static, ()> {
    static AVAILABLE: OnceLock<bool> = OnceLock::new();
    let guard = exclusive();
    let available = *AVAILABLE.get_or_init(|| {
        let engine = Command::new("docker").arg("info").output();
        if !engine.is_ok_and(|o| o.status.success()) || compose_program().is_none() {
            return false;
        }
        let build = run(Command::new("bash").arg(repository().join("deploy/build-images.sh")));
        assert!(
            build.status.success(),
            "deploy/build-images.sh failed: {}",
            String::from_utf8_lossy(&build.stderr)
        );
        eprintln!("{}", String::from_utf8_lossy(&build.stdout).trim());
        true
    });
    assert!(
        available,
        "the docker-compose tests need a running Docker engine and docker-compose (or the \
         `docker compose` plugin): apt-get install docker.io docker-compose"
    );
    guard
}

/// One compose project of `deploy/docker-compose.yml`, taken down with its volumes on drop.
struct Compose {
    project: String,
    /// Both JobManagers' published addresses, comma-separated (the leader answers).
    jobmanager: String,
    /// The published HTTP ports (dashboard, REST API) of `jobmanager-a` and `jobmanager-b`.
    http_ports: [u16; 2],
    /// Prometheus' published port, `127.0.0.1:PORT`.
    prometheus: String,
    postgres_port: u16,
    env: Vec<(String, String)>,
    scratch: Scratch,
}

impl Compose {
    fn up(name: &str, taskmanagers: usize) -> Compose {
        let project = format!("eddytest{name}{}", std::process::id());
        let jobmanager_ports = [free_port(), free_port()];
        let postgres_port = free_port();
        let http_ports = [free_port(), free_port()];
        let prometheus_port = free_port();
        let env = vec![
            ("EDDY_HTTP_PORT".to_string(), http_ports[0].to_string()),
            ("EDDY_HTTP_B_PORT".to_string(), http_ports[1].to_string()),
            (
                "EDDY_PROMETHEUS_PORT".to_string(),
                prometheus_port.to_string(),
            ),
            (
                "EDDY_JOBMANAGER_PORT".to_string(),
                jobmanager_ports[0].to_string(),
            ),
            (
                "EDDY_JOBMANAGER_B_PORT".to_string(),
                jobmanager_ports[1].to_string(),
            ),
            ("EDDY_POSTGRES_PORT".to_string(), postgres_port.to_string()),
            ("EDDY_KAFKA_PORT".to_string(), free_port().to_string()),
        ];
        let jobmanager = format!(
            "https://127.0.0.1:{},https://127.0.0.1:{}",
            jobmanager_ports[0], jobmanager_ports[1]
        );
        // TLS and tokens are on: clients trust the cluster CA and present the admin token,
        // both made by deploy/build-images.sh.
        let certs = repository().join("deploy/certs");
        let token = std::fs::read_to_string(certs.join("admin.token"))
            .expect("deploy/certs/admin.token (made by deploy/build-images.sh)");
        crate::processes::secure_clients_of(
            &jobmanager,
            &[
                ("EDDY_TLS_CA", certs.join("ca.pem").to_str().unwrap()),
                ("EDDY_TOKEN", token.trim()),
            ],
        );
        let compose = Compose {
            project,
            jobmanager,
            http_ports,
            prometheus: format!("127.0.0.1:{prometheus_port}"),
            postgres_port,
            env,
            scratch: Scratch::new(&format!("compose-{name}")),
        };
        let started = Instant::now();
        compose.compose(&[
            "up",
            "-d",
            "--scale",
            &format!("taskmanager={taskmanagers}"),
        ]);
        compose.wait_until_ready(taskmanagers * 2);
        eprintln!(
            "{name}: cluster of {taskmanagers} TaskManagers up in {:.1} s",
            started.elapsed().as_secs_f64()
        );
        compose
    }

    fn compose(&self, args: &[&str]) -> Output {
        let program = compose_program().expect("compose");
        let output = run(Command::new(program[0])
            .args(&program[1..])
            .args(["-p", &self.project, "-f"])
            .arg(repository().join("deploy/docker-compose.yml"))
            .args(args)
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str()))));
        assert!(
            output.status.success(),
            "compose {args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        output
    }

    /// Waits until PostgreSQL answers and a probe job needing `slots` slots runs.
    fn wait_until_ready(&self, slots: usize) {
        let deadline = Instant::now() + Duration::from_secs(120);
        while !answers_at(self.postgres_port) {
            assert!(Instant::now() < deadline, "PostgreSQL did not come up");
            std::thread::sleep(Duration::from_millis(200));
        }
        let probe = format!(
            "SET 'parallelism.default' = '{slots}';
             CREATE TABLE t (id BIGINT) WITH ('connector' = 'datagen', 'number-of-rows' = '1');
             CREATE TABLE o (id BIGINT) WITH ('connector' = 'blackhole');
             INSERT INTO o SELECT id FROM t;"
        );
        loop {
            if let Ok(job) = submit_at(&self.jobmanager, &self.scratch, &probe, &[]) {
                wait_for_at(&self.jobmanager, &job, "FINISHED", FOUR_MINUTES);
                return;
            }
            assert!(Instant::now() < deadline, "the cluster did not come up");
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Containers of a service, by name.
    fn containers(&self, service: &str) -> Vec<String> {
        let output = run(Command::new("docker").args([
            "ps",
            "-a",
            "--filter",
            &format!("label=com.docker.compose.project={}", self.project),
            "--filter",
            &format!("label=com.docker.compose.service={service}"),
            "--format",
            "{{.Names}}",
        ]));
        let mut names: Vec<String> = String::from_utf8_lossy(&output.stdout)
            .lines()
            .map(str::to_string)
            .collect();
        names.sort();
        names
    }

    /// The TaskManager container that runs tasks of `job` (TaskManager ids are
    /// `tm-{hostname}-{pid}`, and a container's host name is its id).
    fn busy_taskmanager(&self, job: &str) -> String {
        let status = status_at(&self.jobmanager, job);
        let ids: Vec<String> = status["vertices"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|v| v["subtasks"].as_array().into_iter().flatten())
            .filter_map(|t| t["taskmanager"].as_str().map(str::to_string))
            .collect();
        self.containers("taskmanager")
            .into_iter()
            .find(|name| {
                let host = docker(&["inspect", "-f", "{{.Config.Hostname}}", name]);
                ids.iter()
                    .any(|id| id.starts_with(&format!("tm-{}-", host.trim())))
            })
            .expect("a TaskManager container runs the job")
    }

    /// The service of the JobManager leading `job`'s cluster, and its term.
    fn leader(&self, job: &str) -> (String, u64) {
        let status = status_at(&self.jobmanager, job);
        let leader = &status["leader"];
        let service = leader["address"]
            .as_str()
            .and_then(|a| a.strip_prefix("https://"))
            .and_then(|a| a.split(':').next())
            .unwrap_or_else(|| panic!("no leader named: {status}"));
        (service.to_string(), leader["term"].as_u64().unwrap())
    }

    /// The published HTTP address (`127.0.0.1:PORT`) of JobManager service `service`.
    fn http_of(&self, service: &str) -> String {
        let port = match service {
            "jobmanager-a" => self.http_ports[0],
            "jobmanager-b" => self.http_ports[1],
            other => panic!("no JobManager service {other}"),
        };
        format!("127.0.0.1:{port}")
    }

    /// The newest completed checkpoint of `job`, if any.
    fn newest_checkpoint(&self, job: &str) -> Option<u64> {
        status_at(&self.jobmanager, job)["checkpoints"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|c| c["state"] == "COMPLETED")
            .filter_map(|c| c["id"].as_u64())
            .max()
    }

    /// Waits until `job` completes a checkpoint newer than `after`.
    fn wait_for_checkpoint_after(&self, job: &str, after: u64) {
        let deadline = Instant::now() + FOUR_MINUTES;
        while self.newest_checkpoint(job).is_none_or(|id| id <= after) {
            assert!(
                Instant::now() < deadline,
                "no checkpoint after {after}: {}",
                status_at(&self.jobmanager, job)
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn network(&self) -> String {
        format!("{}_eddy", self.project)
    }

    fn submit(&self, script: &str, extra: &[&str]) -> String {
        submit_at(&self.jobmanager, &self.scratch, script, extra)
            .unwrap_or_else(|e| panic!("submit failed: {e}"))
    }

    fn wait_for(&self, job: &str, state: &str) -> serde_json::Value {
        wait_for_at(&self.jobmanager, job, state, FOUR_MINUTES)
    }

    /// Waits until `count` checkpoints of the job have completed.
    fn wait_for_checkpoints(&self, job: &str, count: usize) {
        let deadline = Instant::now() + FOUR_MINUTES;
        loop {
            let status = status_at(&self.jobmanager, job);
            let completed = status["checkpoints"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|c| c["state"] == "COMPLETED")
                .count();
            if completed >= count {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "no {count} checkpoints: {status}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Creates the tables of job `name` and runs it at parallelism 2 until it has taken
    /// 3 checkpoints; returns its script and id.
    fn running_job(&self, name: &str, rate: u64) -> (String, String) {
        create_tables(self, name);
        let script = job(name, IN_CLUSTER, rate);
        let id = self.submit(&script, &["--parallelism", "2"]);
        self.wait_for_checkpoints(&id, 3);
        (script, id)
    }

    /// How often the job has restarted so far.
    fn restarts(&self, job: &str) -> u64 {
        status_at(&self.jobmanager, job)["restarts"]
            .as_u64()
            .unwrap_or(0)
    }

    /// Waits until the job runs again after a failure; returns how long that took.
    fn wait_for_recovery(&self, job: &str, restarts_before: u64, since: Instant) -> Duration {
        let deadline = Instant::now() + FOUR_MINUTES;
        loop {
            let status = status_at(&self.jobmanager, job);
            let restarted = status["restarts"].as_u64().unwrap_or(0) > restarts_before;
            if restarted && status["state"] == "RUNNING" {
                return since.elapsed();
            }
            assert!(
                Instant::now() < deadline,
                "the job did not recover: {status}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn query(&self, sql: &str) -> Vec<Vec<String>> {
        query_at(self.postgres_port, sql)
    }

    fn logs(&self, container: &str) -> String {
        let output = run(Command::new("docker").args(["logs", container]));
        format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    }
}

impl Drop for Compose {
    fn drop(&mut self) {
        let program = compose_program().expect("compose");
        let _ = Command::new(program[0])
            .args(&program[1..])
            .args(["-p", &self.project, "-f"])
            .arg(repository().join("deploy/docker-compose.yml"))
            .args(["down", "-v", "--timeout", "1"])
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .output();
    }
}

/// Runs `docker ARGS`; returns stdout, failing the test on error.
fn docker(args: &[&str]) -> String {
    let output = run(Command::new("docker").args(args));
    assert!(
        output.status.success(),
        "docker {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// The job: per-auction counts (upsert) and cheap bids (append) of a throttled, bounded
/// Nexmark stream into PostgreSQL at `url`, exactly once, tables prefixed `name`.
fn job(name: &str, url: &str, rate: u64) -> String {
    format!(
        "SET 'execution.checkpointing.interval' = '300ms';
         SET 'restart-strategy.exponential-delay.initial-backoff' = '200ms';
         SET 'restart-strategy.exponential-delay.max-backoff' = '500ms';
         CREATE TABLE bid (auction BIGINT, bidder BIGINT, price BIGINT)
           WITH ('connector' = 'nexmark', 'nexmark.table' = 'bid', 'events.num' = '150000',
           'events.rate' = '{rate}');
         CREATE TABLE per_auction (auction BIGINT, bids BIGINT, top BIGINT,
           PRIMARY KEY (auction) NOT ENFORCED) WITH ('connector' = 'postgres', 'url' = '{url}',
           'table' = '{name}_per_auction', 'sink.delivery-guarantee' = 'exactly-once');
         CREATE TABLE cheap (auction BIGINT, bidder BIGINT, price BIGINT) WITH (
           'connector' = 'postgres', 'url' = '{url}', 'table' = '{name}_cheap',
           'sink.delivery-guarantee' = 'exactly-once');
         INSERT INTO per_auction SELECT auction, COUNT(*), MAX(price) FROM bid GROUP BY auction;
         INSERT INTO cheap SELECT auction, bidder, price FROM bid WHERE price < 1000;"
    )
}

const IN_CLUSTER: &str = "postgres://postgres@postgres:5432/postgres";

fn create_tables(compose: &Compose, name: &str) {
    compose.query(&format!(
        "CREATE TABLE {name}_per_auction (auction BIGINT PRIMARY KEY, bids BIGINT, top BIGINT);
         CREATE TABLE {name}_cheap (auction BIGINT, bidder BIGINT, price BIGINT);"
    ));
}

/// What the job wrote under `name`, sorted.
fn contents(compose: &Compose, name: &str) -> (Vec<Vec<String>>, Vec<Vec<String>>) {
    (
        compose.query(&format!("SELECT * FROM {name}_per_auction ORDER BY 1")),
        compose.query(&format!("SELECT * FROM {name}_cheap ORDER BY 1, 2, 3")),
    )
}

/// Waits for `job` to finish, restored from a checkpoint, with the tables prefixed `name`
/// equal to a failure-free run's.
fn assert_restored_and_exact(compose: &Compose, job: &str, name: &str) {
    let status = compose.wait_for(job, "FINISHED");
    assert!(
        status["restored_from"].as_u64().unwrap_or(0) > 0,
        "{status}"
    );
    assert_equals_failure_free(compose, name);
}

/// Runs the job failure-free on the host's embedded cluster, into the same PostgreSQL.
fn assert_equals_failure_free(compose: &Compose, name: &str) {
    create_tables(compose, "reference");
    let url = format!(
        "postgres://postgres@127.0.0.1:{}/postgres",
        compose.postgres_port
    );
    run_ok(&compose.scratch, &job("reference", &url, 0), 2);
    let expected = contents(compose, "reference");
    assert!(!expected.0.is_empty() && !expected.1.is_empty());
    let got = contents(compose, name);
    assert!(
        got.0 == expected.0,
        "per-auction counts differ: {} rows, {} expected",
        got.0.len(),
        expected.0.len()
    );
    assert!(
        got.1 == expected.1,
        "cheap bids differ: {} rows, {} expected",
        got.1.len(),
        expected.1.len()
    );
    let prepared = compose.query("SELECT gid FROM pg_prepared_xacts");
    assert!(
        prepared.is_empty(),
        "transactions left prepared: {prepared:?}"
    );
}

#[test]
#[ignore = "tier docker: builds the static image and runs the compose cluster (needs Docker); .ci/run runs the tier"]
fn a_killed_taskmanager_container_loses_and_duplicates_nothing() {
    let _docker = exclusive_docker();
    let compose = Compose::up("kill", 3);
    let (_, job) = compose.running_job("killed", 10_000);
    let victim = compose.busy_taskmanager(&job);
    let restarts = compose.restarts(&job);
    let killed_at = Instant::now();
    docker(&["kill", &victim]);
    let recovery = compose.wait_for_recovery(&job, restarts, killed_at);
    eprintln!(
        "docker kill {victim}: the job ran again after {:.2} s",
        recovery.as_secs_f64()
    );
    assert_restored_and_exact(&compose, &job, "killed");
}

#[test]
#[ignore = "tier docker: builds the static image and runs the compose cluster (needs Docker); .ci/run runs the tier"]
fn the_standby_takes_over_when_the_leading_jobmanager_container_is_killed() {
    let _docker = exclusive_docker();
    let compose = Compose::up("jm", 3);
    let (_, job) = compose.running_job("resumed", 3_000);
    for round in 0..2 {
        let (leader, term) = compose.leader(&job);
        let container = compose.containers(&leader)[0].clone();
        let before = compose.newest_checkpoint(&job).unwrap_or(0);
        let killed_at = Instant::now();
        docker(&["kill", &container]);
        compose.wait_for_checkpoint_after(&job, before);
        let (new_leader, new_term) = compose.leader(&job);
        eprintln!(
            "docker kill {container} ({leader}, term {term}): {new_leader} leads in term {new_term}; first checkpoint completed under it {:.1} s after the kill",
            killed_at.elapsed().as_secs_f64()
        );
        assert_ne!(new_leader, leader);
        assert!(new_term > term);
        // The killed JobManager comes back as the standby; the second round kills the
        // leader that took over.
        let standing_by = |logs: String| logs.matches("standing by").count();
        let before = standing_by(compose.logs(&container));
        docker(&["start", &container]);
        let deadline = Instant::now() + Duration::from_secs(60);
        while standing_by(compose.logs(&container)) == before {
            assert!(
                Instant::now() < deadline,
                "round {round}: {container} does not stand by after its restart: {}",
                compose.logs(&container)
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    // Each new leader found every task still running on the TaskManagers and adopted the
    // run: the job never restarted.
    let status = compose.wait_for(&job, "FINISHED");
    assert_eq!(status["restarts"].as_u64().unwrap_or(0), 0, "{status}");
    assert_eq!(status["restored_from"].as_u64().unwrap_or(0), 0, "{status}");
    assert_equals_failure_free(&compose, "resumed");
}

#[test]
#[ignore = "tier docker: builds the static image and runs the compose cluster (needs Docker); .ci/run runs the tier"]
fn a_partitioned_taskmanager_is_fenced_when_it_comes_back() {
    let _docker = exclusive_docker();
    let compose = Compose::up("partition", 3);
    let (_, job) = compose.running_job("partitioned", 8_000);
    let victim = compose.busy_taskmanager(&job);
    let restarts = compose.restarts(&job);
    let cut_at = Instant::now();
    docker(&["network", "disconnect", &compose.network(), &victim]);
    // Longer than the heartbeat timeout (3 s): the JobManager fails the job over.
    let recovery = compose.wait_for_recovery(&job, restarts, cut_at);
    std::thread::sleep(Duration::from_secs(2));
    docker(&["network", "connect", &compose.network(), &victim]);
    eprintln!(
        "partition of {victim}: the job ran again after {:.2} s",
        recovery.as_secs_f64()
    );
    compose.wait_for(&job, "FINISHED");
    assert_equals_failure_free(&compose, "partitioned");
    let (leader, _) = compose.leader(&job);
    let jobmanager = compose.logs(&compose.containers(&leader)[0]);
    let taskmanager = compose.logs(&victim);
    let fenced = jobmanager.contains("fenced a report from an earlier attempt")
        || taskmanager.contains("does not know this taskmanager; cancelling its tasks");
    assert!(
        fenced,
        "no sign of the stale attempt being fenced:\n{taskmanager}"
    );
}

#[test]
#[ignore = "tier docker: builds the static image and runs the compose cluster (needs Docker); .ci/run runs the tier"]
fn scale_out_and_resume_from_a_savepoint_at_higher_parallelism() {
    let _docker = exclusive_docker();
    let compose = Compose::up("scale", 5);
    let (script, job) = compose.running_job("rescaled", 8_000);
    // The published dashboard answers, and Prometheus finds every Eddy container by name,
    // the five scaled TaskManagers included.
    let page = Command::new("curl")
        .args(["-sS", "--max-time", "10", "--cacert"])
        .arg(repository().join("deploy/certs/ca.pem"))
        .arg(format!(
            "https://{}/",
            compose.http_of(&compose.leader(&job).0)
        ))
        .output()
        .expect("curl");
    let page = String::from_utf8_lossy(&page.stdout);
    assert!(
        page.contains("dashboard.js"),
        "the dashboard over TLS: {page}"
    );
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let answer = crate::http::get_json(&compose.prometheus, "/api/v1/query?query=up");
        let up = answer["data"]["result"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let healthy = |job: &str| {
            up.iter()
                .filter(|r| r["metric"]["job"] == job && r["value"][1] == "1")
                .count()
        };
        if healthy("eddy-jobmanager") == 1 && healthy("eddy-taskmanager") == 5 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "Prometheus does not see every container: {up:?}"
        );
        std::thread::sleep(Duration::from_secs(1));
    }
    let output = client_at(&compose.jobmanager, &["stop", "--savepoint", &job]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let savepoint = String::from_utf8_lossy(&output.stdout).trim().to_string();
    let resumed = compose.submit(
        &script,
        &["--parallelism", "4", "--from-savepoint", &savepoint],
    );
    let status = compose.wait_for(&resumed, "FINISHED");
    let parallelism: Vec<u64> = status["vertices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["parallelism"].as_u64().unwrap())
        .collect();
    assert!(parallelism.contains(&4), "{status}");
    assert_equals_failure_free(&compose, "rescaled");
}
