//! The Kubernetes manifests of `deploy/k8s`, checked without a Kubernetes cluster (none can
//! run here): they render with kustomize; every container's arguments, variables and probe
//! commands are ones `eddy` takes (`eddy … --help`); and the daemons run the way the
//! manifests start them, with the ConfigMap's configuration files, on an S3-compatible
//! server: two JobManager pods elect a leader through the lease on S3, only the leader
//! passes the readiness probe, a TaskManager pod follows the leader, and a job goes on
//! exactly when the leader is killed.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::processes::{Daemon, free_port, secure_clients_of, signal, submit_at, wait_for_at};
use crate::s3::S3Server;
use crate::support::{Scratch, eddy};

fn manifests() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("deploy/k8s")
}

/// Runs `kubectl ARGS`; fails the test, saying how to get kubectl, when it is missing.
fn kubectl(args: &[&str]) -> String {
    let output = Command::new("kubectl")
        .args(args)
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "kubectl is needed to render deploy/k8s ({e}): install it (e.g. the kubernetes \
             client from https://dl.k8s.io, which bundles kustomize)"
            )
        });
    assert!(
        output.status.success(),
        "kubectl {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// Every object `kubectl kustomize deploy/k8s` renders, as JSON (kubectl converts its own
/// YAML offline: `annotate --local` needs no cluster).
fn rendered(scratch: &Scratch) -> Vec<Value> {
    let yaml = kubectl(&["kustomize", manifests().to_str().unwrap()]);
    let file = scratch.write("rendered.yaml", &yaml);
    let json = kubectl(&[
        "annotate",
        "--local",
        "-o",
        "json",
        "-f",
        file.to_str().unwrap(),
        "eddy.checked=true",
    ]);
    serde_json::Deserializer::from_str(&json)
        .into_iter::<Value>()
        .map(|object| object.expect("kubectl printed JSON"))
        .collect()
}

/// The object of `kind` named `name`.
fn object<'a>(objects: &'a [Value], kind: &str, name: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("deploy/k8s renders no {kind} {name}"))
}

/// A container of a rendered workload.
struct Container {
    workload: String,
    args: Vec<String>,
    /// Variables set by value or from a field (not from secrets).
    env: BTreeMap<String, Option<String>>,
    /// The commands of its exec probes, by probe.
    probes: Vec<(String, Vec<String>)>,
    spec: Value,
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .into_iter()
        .flatten()
        .map(|v| v.as_str().expect("a string").to_string())
        .collect()
}

/// Every container of every Deployment and StatefulSet.
fn containers(objects: &[Value]) -> Vec<Container> {
    let workloads = objects
        .iter()
        .filter(|o| o["kind"] == "Deployment" || o["kind"] == "StatefulSet");
    let mut found = Vec::new();
    for workload in workloads {
        let name = workload["metadata"]["name"].as_str().unwrap();
        for spec in workload["spec"]["template"]["spec"]["containers"]
            .as_array()
            .unwrap()
        {
            let env = spec["env"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|v| {
                    let value = v["value"].as_str().map(str::to_string);
                    (v["name"].as_str().unwrap().to_string(), value)
                })
                .collect();
            let probes = ["readinessProbe", "livenessProbe", "startupProbe"]
                .into_iter()
                .filter(|probe| !spec[*probe].is_null())
                .map(|probe| {
                    let command = strings(&spec[probe]["exec"]["command"]);
                    assert!(!command.is_empty(), "{name}: {probe} is not an exec probe");
                    (probe.to_string(), command)
                })
                .collect();
            found.push(Container {
                workload: name.to_string(),
                args: strings(&spec["args"]),
                env,
                probes,
                spec: spec.clone(),
            });
        }
    }
    found
}

/// What `eddy SUBCOMMAND --help` prints.
fn help(subcommand: &str) -> String {
    let output = eddy().args([subcommand, "--help"]).output().unwrap();
    assert!(output.status.success(), "eddy {subcommand} --help failed");
    String::from_utf8(output.stdout).unwrap()
}

/// The long options a help text lists.
fn long_options(help: &str) -> BTreeSet<String> {
    help.split(|c: char| c.is_whitespace() || c == ',' || c == '[' || c == '<')
        .filter(|word| word.starts_with("--") && word.len() > 2)
        .map(|word| {
            word.trim_end_matches(|c: char| !c.is_ascii_alphanumeric())
                .to_string()
        })
        .collect()
}

#[test]
#[ignore = "tier kubernetes: renders deploy/k8s (needs kubectl); .ci/run runs the tier"]
fn the_manifests_render_with_two_jobmanagers_probes_and_resources() {
    let scratch = Scratch::new("k8s-render");
    let objects = rendered(&scratch);
    let jobmanagers = object(&objects, "StatefulSet", "eddy-jobmanager");
    assert_eq!(jobmanagers["spec"]["replicas"], 2);
    assert_eq!(jobmanagers["spec"]["podManagementPolicy"], "Parallel");
    let headless = object(&objects, "Service", "eddy-jobmanager-headless");
    assert_eq!(headless["spec"]["clusterIP"], "None");
    assert_eq!(headless["spec"]["publishNotReadyAddresses"], true);
    assert_eq!(
        jobmanagers["spec"]["serviceName"],
        "eddy-jobmanager-headless"
    );
    object(&objects, "Service", "eddy-jobmanager");
    object(&objects, "Deployment", "eddy-taskmanager");
    let config = object(&objects, "ConfigMap", "eddy-config");
    for file in ["jobmanager.toml", "taskmanager.toml"] {
        assert!(
            config["data"][file].is_string(),
            "no {file} in the ConfigMap"
        );
    }
    let s3 = object(&objects, "Secret", "eddy-s3");
    for key in ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION"] {
        assert!(
            s3["stringData"][key].is_string(),
            "no {key} in the S3 secret"
        );
    }
    for container in containers(&objects) {
        let name = &container.workload;
        let probes: Vec<&str> = container.probes.iter().map(|(p, _)| p.as_str()).collect();
        assert!(
            probes.contains(&"readinessProbe"),
            "{name}: no readiness probe"
        );
        for (probe, command) in &container.probes {
            assert_eq!(command[..2], ["/eddy", "health"], "{name}: {probe}");
        }
        let resources = &container.spec["resources"];
        assert!(
            resources["requests"]["cpu"].is_string() && resources["requests"]["memory"].is_string(),
            "{name}: no resource requests"
        );
        assert!(
            resources["limits"]["memory"].is_string(),
            "{name}: no memory limit"
        );
        let secrets: Vec<&Value> = container.spec["envFrom"]
            .as_array()
            .unwrap()
            .iter()
            .collect();
        assert!(
            secrets.iter().any(|s| s["secretRef"]["name"] == "eddy-s3"),
            "{name}: no S3 credentials"
        );
    }
}

#[test]
#[ignore = "tier kubernetes: renders deploy/k8s (needs kubectl); .ci/run runs the tier"]
fn every_container_argument_is_one_eddy_takes() {
    let scratch = Scratch::new("k8s-args");
    let objects = rendered(&scratch);
    let containers = containers(&objects);
    assert!(containers.len() >= 2);
    for container in &containers {
        let name = &container.workload;
        let subcommand = container.args.first().expect("a subcommand");
        let text = help(subcommand);
        let options = long_options(&text);
        for arg in &container.args[1..] {
            let option = arg.split('=').next().unwrap();
            assert!(
                options.contains(option),
                "{name}: `eddy {subcommand}` has no option {option} (it has {options:?})"
            );
            // Kubernetes leaves a reference to an undefined variable as it is.
            for reference in arg.split("$(").skip(1) {
                let variable = reference.split(')').next().unwrap();
                assert!(
                    container.env.contains_key(variable),
                    "{name}: {arg} names $({variable}), which the container does not define"
                );
            }
        }
        for variable in container.env.keys().filter(|v| v.starts_with("EDDY_")) {
            assert!(
                text.contains(&format!("[env: {variable}")),
                "{name}: `eddy {subcommand}` reads no {variable}"
            );
        }
        for (probe, command) in &container.probes {
            let probe_help = help(&command[1]);
            assert!(
                command[2..].iter().all(|a| !a.starts_with("--"))
                    && probe_help.contains("<ADDRESS>"),
                "{name}: {probe} {command:?} is not `eddy health ADDRESS`"
            );
        }
    }
}

/// A pod of the rendered manifests run as a process on loopback: its container's
/// arguments with the pod's variables expanded and its addresses mapped to loopback ports.
struct Pod {
    args: Vec<String>,
    env: Vec<(String, String)>,
    probes: Vec<Vec<String>>,
}

impl Pod {
    fn new(container: &Container, fields: &[(&str, &str)], addresses: &[(String, String)]) -> Pod {
        let map = |text: &str| {
            let mut text = text.to_string();
            for (variable, value) in fields {
                text = text.replace(&format!("$({variable})"), value);
            }
            for (from, to) in addresses {
                text = text.replace(from.as_str(), to);
            }
            text
        };
        let env = container
            .env
            .iter()
            .map(|(name, value)| {
                let value = match value {
                    Some(value) => value.clone(),
                    None => fields
                        .iter()
                        .find(|(f, _)| f == name)
                        .unwrap_or_else(|| panic!("no value for the pod's {name}"))
                        .1
                        .to_string(),
                };
                (name.clone(), value)
            })
            .collect();
        Pod {
            args: container.args.iter().map(|a| map(a)).collect(),
            env,
            probes: container
                .probes
                .iter()
                .map(|(_, command)| command[1..].iter().map(|a| map(a)).collect())
                .collect(),
        }
    }

    /// Starts the pod's process with the S3 credentials and configuration files given; its
    /// log goes to a file beside them.
    fn start(&self, extra_env: &[(String, String)], config_dir: &Path) -> Daemon {
        let mut command = eddy();
        let args = self
            .args
            .iter()
            .map(|a| a.replace("/etc/eddy/config", config_dir.to_str().unwrap()));
        command
            .args(args)
            .envs(self.env.iter().cloned())
            .envs(extra_env.iter().cloned())
            .env("EDDY_TEST_STDERR_DIR", config_dir)
            .stdin(Stdio::null());
        Daemon::spawn(command)
    }

    /// Whether the pod's readiness probe passes.
    fn ready(&self) -> bool {
        eddy()
            .args(&self.probes[0])
            .output()
            .unwrap()
            .status
            .success()
    }
}

#[test]
#[ignore = "tier kubernetes: renders deploy/k8s (needs kubectl); .ci/run runs the tier"]
fn the_pods_run_as_rendered_and_the_standby_takes_over_on_s3() {
    let scratch = Scratch::new("k8s-pods");
    let objects = rendered(&scratch);
    let containers = containers(&objects);
    let container = |workload: &str| {
        containers
            .iter()
            .find(|c| c.workload == workload)
            .unwrap_or_else(|| panic!("no {workload}"))
    };
    // What the secrets and the ConfigMap's mounts hold, made here.
    let etc = scratch.path().join("etc");
    let made = eddy()
        .args(["cert", "--out"])
        .arg(etc.join("tls"))
        .arg("node")
        .output()
        .unwrap();
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    std::fs::create_dir_all(etc.join("tokens")).unwrap();
    let token = eddy()
        .args(["token", "admin", "--append"])
        .arg(etc.join("tokens/tokens"))
        .output()
        .unwrap();
    assert!(token.status.success());
    let token = String::from_utf8(token.stdout).unwrap().trim().to_string();
    let s3 = S3Server::start("eddy");
    let aws = [
        ("AWS_ACCESS_KEY_ID", "test"),
        ("AWS_SECRET_ACCESS_KEY", "test"),
        ("AWS_REGION", "us-east-1"),
        ("AWS_ENDPOINT", s3.endpoint.as_str()),
        ("AWS_ALLOW_HTTP", "true"),
    ]
    .map(|(k, v)| (k.to_string(), v.to_string()));

    // Each pod's ports on loopback, and the names of the manifests mapped to them.
    let jobmanager_ports = [free_port(), free_port()];
    let taskmanager_port = free_port();
    let mut addresses: Vec<(String, String)> = (0..2)
        .map(|i| {
            (
                format!("eddy-jobmanager-{i}.eddy-jobmanager-headless:6123"),
                format!("127.0.0.1:{}", jobmanager_ports[i]),
            )
        })
        .collect();
    addresses.push((
        "127.0.0.1:6124".into(),
        format!("127.0.0.1:{taskmanager_port}"),
    ));
    addresses.push((
        "0.0.0.0:6124".into(),
        format!("127.0.0.1:{taskmanager_port}"),
    ));
    let config = object(&objects, "ConfigMap", "eddy-config");
    let config_dir = |pod: &str, http_port: u16| {
        let dir = scratch.path().join(format!("config-{pod}"));
        std::fs::create_dir_all(&dir).unwrap();
        for file in ["jobmanager.toml", "taskmanager.toml"] {
            let text = config["data"][file]
                .as_str()
                .unwrap()
                .replace("/etc/eddy", etc.to_str().unwrap())
                .replace("0.0.0.0:8081", &format!("127.0.0.1:{http_port}"))
                .replace("0.0.0.0:9249", &format!("127.0.0.1:{http_port}"));
            std::fs::write(dir.join(file), text).unwrap();
        }
        dir
    };
    let mut jobmanagers: Vec<(Pod, Daemon)> = (0..2)
        .map(|i| {
            let pod_name = format!("eddy-jobmanager-{i}");
            let mut own = addresses.clone();
            own.push((
                "0.0.0.0:6123".into(),
                format!("127.0.0.1:{}", jobmanager_ports[i]),
            ));
            own.push((
                "127.0.0.1:6123".into(),
                format!("127.0.0.1:{}", jobmanager_ports[i]),
            ));
            let pod = Pod::new(
                container("eddy-jobmanager"),
                &[("POD_NAME", &pod_name)],
                &own,
            );
            let daemon = pod.start(&aws, &config_dir(&pod_name, free_port()));
            (pod, daemon)
        })
        .collect();
    let taskmanager = Pod::new(
        container("eddy-taskmanager"),
        &[("POD_NAME", "eddy-taskmanager-0"), ("POD_IP", "127.0.0.1")],
        &addresses,
    );
    let _taskmanager = taskmanager.start(&aws, &config_dir("eddy-taskmanager-0", free_port()));

    // One JobManager leads and is ready; the other stands by, not ready.
    let deadline = Instant::now() + Duration::from_secs(60);
    let leader = loop {
        let ready: Vec<usize> = (0..2).filter(|&i| jobmanagers[i].0.ready()).collect();
        if ready.len() == 1 {
            break ready[0];
        }
        assert!(ready.len() < 2, "both JobManagers are ready");
        assert!(Instant::now() < deadline, "no JobManager became ready");
        std::thread::sleep(Duration::from_millis(200));
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while !taskmanager.ready() {
        assert!(
            Instant::now() < deadline,
            "the TaskManager did not become ready"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let clients = format!(
        "https://127.0.0.1:{},https://127.0.0.1:{}",
        jobmanager_ports[0], jobmanager_ports[1]
    );
    let ca = etc.join("tls/ca.pem");
    secure_clients_of(
        &clients,
        &[
            ("EDDY_TLS_CA", ca.to_str().unwrap()),
            ("EDDY_TLS_SERVER_NAME", "node"),
            ("EDDY_TOKEN", &token),
        ],
    );

    // A job writing to the bucket, exactly once, through the leader's death.
    let rows = 30_000;
    let script = format!(
        "SET 'execution.checkpointing.interval' = '500ms';
         CREATE TABLE numbers (id BIGINT) WITH ('connector' = 'datagen',
           'fields.id.kind' = 'sequence', 'fields.id.start' = '1', 'fields.id.end' = '{rows}',
           'rows-per-second' = '2000');
         CREATE TABLE out (id BIGINT) WITH ('connector' = 'filesystem',
           'path' = 's3://eddy/out/', 'format' = 'csv',
           'sink.delivery-guarantee' = 'exactly-once');
         INSERT INTO out SELECT id FROM numbers;"
    );
    let job = submit_at(&clients, &scratch, &script, &["--parallelism", "2"])
        .unwrap_or_else(|e| panic!("submit through the manifests' cluster: {e}"));
    wait_for_at(&clients, &job, "RUNNING", Duration::from_secs(60));
    std::thread::sleep(Duration::from_secs(4));
    let (_, dead) = &mut jobmanagers[leader];
    signal(dead.child.id(), "KILL");
    let _ = dead.child.wait();
    let standby = 1 - leader;
    let deadline = Instant::now() + Duration::from_secs(60);
    while !jobmanagers[standby].0.ready() {
        assert!(Instant::now() < deadline, "the standby did not take over");
        std::thread::sleep(Duration::from_millis(200));
    }
    let status = wait_for_at(&clients, &job, "FINISHED", Duration::from_secs(120));
    assert!(
        status["leader"]["term"].as_u64().unwrap_or(0) >= 2,
        "{status}"
    );
    let mut ids: Vec<u64> = s3
        .objects("eddy", "out/")
        .into_iter()
        .filter(|(key, _)| !key.rsplit('/').next().unwrap_or_default().starts_with('.'))
        .flat_map(|(_, body)| {
            body.lines()
                .map(|l| l.parse::<u64>().unwrap())
                .collect::<Vec<_>>()
        })
        .collect();
    ids.sort_unstable();
    assert_eq!(ids.len() as u64, rows, "rows written, exactly once");
    assert!(ids.iter().copied().eq(1..=rows), "every id once");
}
