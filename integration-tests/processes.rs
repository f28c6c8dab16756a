//! A cluster of real processes on loopback: a JobManager and TaskManagers started from the
//! `eddy` binary, their print-sink output collected, all stopped on drop.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, Instant};

use crate::support::{Scratch, eddy};

/// One daemon process.
pub struct Daemon {
    /// The process.
    pub child: Child,
    lines: Arc<Mutex<Vec<String>>>,
    /// The file its log goes to, if not the test's standard error.
    pub log: Option<std::path::PathBuf>,
}

impl Daemon {
    /// Starts `command`, collecting what it prints. Its log goes to the test's standard
    /// error, or into a file of directory `EDDY_TEST_STDERR_DIR` when the command's
    /// environment sets that.
    pub fn spawn(mut command: Command) -> Daemon {
        let log_dir = command
            .get_envs()
            .find(|(k, _)| *k == "EDDY_TEST_STDERR_DIR")
            .and_then(|(_, v)| v.map(std::path::PathBuf::from));
        let log = log_dir.map(|dir| {
            static LOGS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
            let n = LOGS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            std::fs::create_dir_all(&dir).unwrap();
            dir.join(format!("daemon-{n}.log"))
        });
        let stderr = match &log {
            Some(path) => Stdio::from(std::fs::File::create(path).unwrap()),
            None => Stdio::inherit(),
        };
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .expect("start eddy");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let stdout = child.stdout.take().expect("stdout");
        let sink = lines.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                sink.lock().unwrap().push(line);
            }
        });
        Daemon { child, lines, log }
    }

    /// What it printed so far.
    pub fn output(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
    }

    /// Sends SIGTERM and waits up to `within` for a clean exit.
    pub fn terminate(&mut self, within: Duration) -> std::process::ExitStatus {
        signal(self.child.id(), "TERM");
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "the daemon did not stop within {within:?} of SIGTERM"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Resident memory in KiB.
    pub fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .unwrap_or_default();
        status
            .lines()
            .find(|l| l.starts_with("VmRSS:"))
            .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
            .unwrap_or(0)
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Sends a signal to a process.
pub fn signal(pid: u32, name: &str) {
    let status = Command::new("kill")
        .arg(format!("-{name}"))
        .arg(pid.to_string())
        .status()
        .unwrap();
    assert!(status.success());
}

/// A free loopback port, never one handed out before in this test process: a port is
/// free again once its probe closes, and tests running side by side (a compose file's
/// published ports are bound only when its containers start) would otherwise get the same.
pub fn free_port() -> u16 {
    static HANDED_OUT: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    let mut handed_out = HANDED_OUT.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        if !handed_out.contains(&port) {
            handed_out.push(port);
            return port;
        }
    }
}

/// A JobManager and its TaskManagers.
pub struct Cluster {
    /// `http://127.0.0.1:PORT`.
    pub address: String,
    /// The JobManager's HTTP port (REST API, dashboard, `/metrics`): `127.0.0.1:PORT`.
    pub http: String,
    /// The JobManager.
    pub jobmanager: Daemon,
    /// The TaskManagers, in start order.
    pub taskmanagers: Vec<Daemon>,
    /// With high availability, the other JobManagers (standbys at first), each with its
    /// port and HTTP address.
    pub standbys: Vec<(Daemon, u16, String)>,
    /// Scratch space for scripts.
    pub scratch: Scratch,
    env: Vec<(String, String)>,
    jobmanager_args: Vec<String>,
    next_id: usize,
}

/// The command that starts a JobManager on `port`, keeping checkpoints and the job store in
/// the scratch directory unless the arguments say otherwise.
fn jobmanager_command(
    (port, http): (u16, &str),
    scratch: &Scratch,
    args: &[&str],
    env: &[(&str, &str)],
) -> Command {
    let mut command = eddy();
    command.envs(env.iter().copied());
    command.args([
        "jobmanager",
        "--bind",
        &format!("127.0.0.1:{port}"),
        "--http-bind",
        http,
        "--heartbeat-interval-ms",
        "200",
        "--heartbeat-timeout-ms",
        "2000",
    ]);
    let default_dir = scratch.path().join("checkpoints").display().to_string();
    if !args.contains(&"--checkpoint-dir") {
        command.args(["--checkpoint-dir", &default_dir]);
    }
    command.args(args);
    command
}

/// A JobManager of a highly available cluster on `port` (HTTP on `http`), sharing the
/// checkpoint directory (in `scratch`, or `--checkpoint-dir` of `extra` arguments) with
/// the others, with `lease` = [duration, renew interval].
pub fn ha_jobmanager(
    (port, http): (u16, &str),
    scratch: &Scratch,
    lease: [&str; 2],
    extra: &[&str],
    env: &[(&str, &str)],
) -> Daemon {
    let advertise = format!("http://127.0.0.1:{port}");
    let mut args = vec![
        "--high-availability",
        "object-store",
        "--advertise",
        &advertise,
        "--ha-lease-duration",
        lease[0],
        "--ha-lease-renew-interval",
        lease[1],
    ];
    args.extend(extra);
    Daemon::spawn(jobmanager_command((port, http), scratch, &args, env))
}

impl Cluster {
    /// A JobManager and `count` TaskManagers of `slots` slots each.
    pub fn start(name: &str, count: usize, slots: usize) -> Cluster {
        Cluster::start_with(name, count, slots, &[], &[])
    }

    /// As [`Cluster::start`], with extra JobManager arguments and an environment for all
    /// daemons (e.g. S3 credentials).
    pub fn start_with(
        name: &str,
        count: usize,
        slots: usize,
        jobmanager_args: &[&str],
        env: &[(&str, &str)],
    ) -> Cluster {
        Cluster::start_secured(name, count, slots, jobmanager_args, env, &[])
    }

    /// As [`Cluster::start_with`], its clients run with `client_env` (TLS files, a token):
    /// every client command at its address, made through this module, gets it.
    pub fn start_secured(
        name: &str,
        count: usize,
        slots: usize,
        jobmanager_args: &[&str],
        env: &[(&str, &str)],
        client_env: &[(&str, &str)],
    ) -> Cluster {
        // A port probed free can be taken (another test's ephemeral port) before the
        // JobManager binds it; it then exits, and the cluster starts again on other ports.
        let mut spare = Some(Scratch::new(name));
        for _ in 0..3 {
            let port = free_port();
            let http = format!("127.0.0.1:{}", free_port());
            let address = format!("http://127.0.0.1:{port}");
            secure_clients_of(&address, client_env);
            let scratch = spare.take().expect("scratch");
            let jobmanager = Daemon::spawn(jobmanager_command(
                (port, &http),
                &scratch,
                jobmanager_args,
                env,
            ));
            let mut cluster = Cluster {
                address,
                http,
                jobmanager,
                taskmanagers: Vec::new(),
                standbys: Vec::new(),
                scratch,
                env: env
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
                jobmanager_args: jobmanager_args.iter().map(|a| a.to_string()).collect(),
                next_id: 0,
            };
            for _ in 0..count {
                cluster.add_taskmanager(slots);
            }
            match cluster.wait_for_slots(count * slots) {
                Ok(()) => return cluster,
                Err(status) => {
                    eprintln!(
                        "the JobManager exited ({status}) before the cluster came up; starting again on other ports"
                    );
                    spare = Some(cluster.into_scratch());
                }
            }
        }
        panic!("the JobManager exited before the cluster came up, three times");
    }

    /// Two JobManagers electing a leader through a lease in their shared checkpoint
    /// directory (`lease` = [duration, renew interval]), the first leading, with `extra`
    /// arguments (`--checkpoint-dir s3://…`) and `env` (failpoints only for the first),
    /// and `count` TaskManagers of `slots` slots given both addresses; clients are too.
    pub fn start_ha(
        name: &str,
        (count, slots): (usize, usize),
        lease: [&str; 2],
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Cluster {
        let ports = [free_port(), free_port()];
        let https = [0, 1].map(|_| format!("127.0.0.1:{}", free_port()));
        let scratch = Scratch::new(name);
        let address = ports.map(|p| format!("http://127.0.0.1:{p}")).join(",");
        let spawn = |i: usize, env: &[(&str, &str)]| {
            ha_jobmanager((ports[i], &https[i]), &scratch, lease, extra, env)
        };
        let jobmanager = spawn(0, env);
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", ports[0])).is_err() {
            assert!(
                Instant::now() < deadline,
                "the first JobManager did not lead"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let calm: Vec<(&str, &str)> = env
            .iter()
            .copied()
            .filter(|(k, _)| *k != "EDDY_FAILPOINTS")
            .collect();
        let standby = spawn(1, &calm);
        let mut cluster = Cluster {
            address,
            http: https[0].clone(),
            jobmanager,
            taskmanagers: Vec::new(),
            standbys: vec![(standby, ports[1], https[1].clone())],
            scratch,
            env: calm
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            jobmanager_args: extra.iter().map(|a| a.to_string()).collect(),
            next_id: 0,
        };
        for _ in 0..count {
            cluster.add_taskmanager(slots);
        }
        if let Err(status) = cluster.wait_for_slots(count * slots) {
            panic!("the first JobManager exited ({status}) before the cluster came up");
        }
        cluster
    }

    /// A new standby JobManager of a cluster of [`Cluster::start_ha`] on `port` and `http`
    /// (those of one that died, so that the TaskManagers' list of addresses stays whole),
    /// with `extra` in its environment (failpoints).
    fn ha_standby(
        &self,
        (port, http): (u16, &str),
        lease: [&str; 2],
        extra: &[(&str, &str)],
    ) -> Daemon {
        let args = self.jobmanager_arguments();
        ha_jobmanager(
            (port, http),
            &self.scratch,
            lease,
            &args,
            &self.env_with(extra),
        )
    }

    /// The environment of daemons started now, with `extra`.
    fn env_with<'a>(&'a self, extra: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
        let mut env: Vec<(&str, &str)> = self
            .env
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        env.extend_from_slice(extra);
        env
    }

    /// The extra arguments every JobManager of the cluster is started with.
    fn jobmanager_arguments(&self) -> Vec<&str> {
        self.jobmanager_args.iter().map(String::as_str).collect()
    }

    /// JobManager `i` (0 or 1) of a cluster of [`Cluster::start_ha`]: the process, its port
    /// and its HTTP address.
    pub fn ha_jobmanager(&mut self, i: usize) -> (&mut Daemon, u16, String) {
        match i {
            0 => {
                let first = self.address.split(',').next().unwrap_or_default();
                let port = first.rsplit(':').next().and_then(|p| p.parse().ok());
                (&mut self.jobmanager, port.unwrap_or(0), self.http.clone())
            }
            _ => {
                let (daemon, port, http) = &mut self.standbys[0];
                (daemon, *port, http.clone())
            }
        }
    }

    /// Replaces JobManager `i` of a cluster of [`Cluster::start_ha`] (killing it, if it
    /// still runs) by a new standby on its ports, with `extra` in its environment.
    pub fn replace_ha_jobmanager(&mut self, i: usize, lease: [&str; 2], extra: &[(&str, &str)]) {
        let (_, port, http) = self.ha_jobmanager(i);
        let standby = self.ha_standby((port, &http), lease, extra);
        // The one replaced is killed as it is dropped.
        *self.ha_jobmanager(i).0 = standby;
    }

    /// Leaves variable `key` out of the environment of daemons started from now on.
    pub fn remove_env(&mut self, key: &str) {
        self.env.retain(|(k, _)| k != key);
    }

    /// SIGKILLs the JobManager and starts a new one on the same address and storage.
    pub fn restart_jobmanager(&mut self) {
        self.restart_jobmanager_with(&[]);
    }

    /// As [`Cluster::restart_jobmanager`], the new one with `extra` in its environment.
    pub fn restart_jobmanager_with(&mut self, extra: &[(&str, &str)]) {
        self.jobmanager.child.kill().unwrap();
        let _ = self.jobmanager.child.wait();
        let port: u16 = self.address.rsplit(':').next().unwrap().parse().unwrap();
        let command = jobmanager_command(
            (port, &self.http),
            &self.scratch,
            &self.jobmanager_arguments(),
            &self.env_with(extra),
        );
        self.jobmanager = Daemon::spawn(command);
    }

    /// Starts one more TaskManager (without waiting for it to register).
    pub fn add_taskmanager(&mut self, slots: usize) {
        self.add_taskmanager_with(slots, &[]);
    }

    /// As [`Cluster::add_taskmanager`], with `extra` in its environment.
    pub fn add_taskmanager_with(&mut self, slots: usize, extra: &[(&str, &str)]) {
        self.next_id += 1;
        let id = format!("tm-{}", self.next_id);
        let mut command = eddy();
        command.envs(self.env_with(extra));
        command.args([
            "taskmanager",
            "--jobmanager",
            &self.address,
            "--slots",
            &slots.to_string(),
            "--bind",
            "127.0.0.1:0",
            "--http-bind",
            "127.0.0.1:0",
            "--id",
            &id,
        ]);
        self.taskmanagers.push(Daemon::spawn(command));
    }

    /// Waits until the JobManager offers `slots` slots: a probe job needing that many
    /// is accepted and runs. `Err` with its exit status when the JobManager exited first.
    fn wait_for_slots(&mut self, slots: usize) -> Result<(), std::process::ExitStatus> {
        let probe = format!(
            "SET 'parallelism.default' = '{slots}';
             CREATE TABLE t (id BIGINT) WITH ('connector' = 'datagen', 'number-of-rows' = '1');
             CREATE TABLE o (id BIGINT) WITH ('connector' = 'blackhole');
             INSERT INTO o SELECT id FROM t;"
        );
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(status) = self.jobmanager.child.try_wait().unwrap() {
                return Err(status);
            }
            match self.try_submit(&probe, &[]) {
                Ok(job) => {
                    self.wait_for(&job, "FINISHED", Duration::from_secs(30));
                    return Ok(());
                }
                Err(error) => assert!(
                    Instant::now() < deadline,
                    "the JobManager did not come up: {error}"
                ),
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Stops every daemon of the cluster (on drop), keeping its scratch space.
    fn into_scratch(self) -> Scratch {
        let Cluster { scratch, .. } = self;
        scratch
    }

    /// Runs an `eddy` client command against this cluster.
    pub fn client(&self, args: &[&str]) -> std::process::Output {
        client_at(&self.address, args)
    }

    fn try_submit(&self, script: &str, extra: &[&str]) -> Result<String, String> {
        submit_at(&self.address, &self.scratch, script, extra)
    }

    /// Submits a script at a parallelism; returns the job id.
    pub fn submit(&self, script: &str, parallelism: usize) -> String {
        self.try_submit(script, &["--parallelism", &parallelism.to_string()])
            .unwrap_or_else(|e| panic!("submit failed: {e}"))
    }

    /// The job as `eddy status --output json` shows it (retrying for a while when the
    /// JobManager is not answering, e.g. while it restarts).
    pub fn status(&self, job: &str) -> serde_json::Value {
        status_at(&self.address, job)
    }

    /// The job's status, if the JobManager answers now.
    pub fn try_status(&self, job: &str) -> Option<serde_json::Value> {
        let output = self.client(&["status", job, "--output", "json"]);
        output
            .status
            .success()
            .then(|| serde_json::from_slice(&output.stdout).unwrap())
    }

    /// Waits until the job is in `state`; fails fast if it ended in another state.
    pub fn wait_for(&self, job: &str, state: &str, within: Duration) -> serde_json::Value {
        wait_for_at(&self.address, job, state, within)
    }

    /// Everything the TaskManagers printed (their print sinks).
    pub fn printed(&self) -> String {
        self.taskmanagers
            .iter()
            .flat_map(Daemon::output)
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// What the print sinks with `'print-identifier' = 'id'` printed, a line each.
    pub fn printed_by(&self, id: &str) -> String {
        self.printed()
            .lines()
            .filter(|l| l.starts_with(&format!("{id}>")) || l.starts_with(&format!("{id}:")))
            .map(|l| format!("{l}\n"))
            .collect()
    }
}

/// Environment variables, as pairs.
type Environment = Vec<(String, String)>;

/// The environment of clients of secured clusters (TLS files, a token), by address.
static CLIENT_ENV: LazyLock<Mutex<HashMap<String, Environment>>> = LazyLock::new(Default::default);

/// Has every client command at `address` made through this module run with `env` (TLS
/// files, a token).
pub fn secure_clients_of(address: &str, env: &[(&str, &str)]) {
    CLIENT_ENV.lock().unwrap().insert(
        address.to_string(),
        env.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    );
}

/// Runs an `eddy` client command against the JobManager at `address` (with the
/// credentials of its cluster, when it is secured).
pub fn client_at(address: &str, args: &[&str]) -> std::process::Output {
    let env = CLIENT_ENV
        .lock()
        .unwrap()
        .get(address)
        .cloned()
        .unwrap_or_default();
    eddy()
        .args(args)
        .env("EDDY_JOBMANAGER", address)
        .envs(env)
        .output()
        .unwrap()
}

/// Submits a script (written into `scratch`) with extra `submit` arguments; returns the
/// job id or the error printed.
pub fn submit_at(
    address: &str,
    scratch: &Scratch,
    script: &str,
    extra: &[&str],
) -> Result<String, String> {
    let file = scratch.write(&format!("job-{}.sql", crate::support::unique()), script);
    let mut args = vec!["submit"];
    args.extend_from_slice(extra);
    let file = file.display().to_string();
    args.push(&file);
    let output = client_at(address, &args);
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).trim().to_string())
    } else {
        Err(String::from_utf8_lossy(&output.stderr).to_string())
    }
}

/// A job as `eddy status --output json` shows it, retrying for a while when the
/// JobManager is not answering (e.g. while it restarts).
pub fn status_at(address: &str, job: &str) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let output = client_at(address, &["status", job, "--output", "json"]);
        if output.status.success() {
            return serde_json::from_slice(&output.stdout).unwrap();
        }
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(Instant::now() < deadline, "eddy status failed: {stderr}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Waits until a job is in `state`; fails fast if it ended in another state.
pub fn wait_for_at(address: &str, job: &str, state: &str, within: Duration) -> serde_json::Value {
    let deadline = Instant::now() + within;
    loop {
        let status = status_at(address, job);
        let current = status["state"].as_str().unwrap_or_default().to_string();
        if current == state {
            return status;
        }
        let ended = ["FINISHED", "FAILED", "CANCELLED"].contains(&current.as_str());
        assert!(
            !ended,
            "job {job} ended {current}, expected {state}: {status}"
        );
        assert!(
            Instant::now() < deadline,
            "job {job} is {current}, not {state}, after {within:?}: {status}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
