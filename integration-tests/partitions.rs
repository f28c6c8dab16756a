//! Network partitions on this machine: the JobManager and each TaskManager run in a network
//! namespace of their own, joined by a bridge that lives in a namespace too (so that the
//! host's firewall never sees their traffic), and the test's clients reach the JobManager
//! over one more link from the host. A partition drops one direction of packets with
//! iptables inside one namespace, and is healed the same way; checkpoints and the
//! exactly-once sink are on the shared local disk, which the cut-off node still reaches.
//! Every option is at its default (heartbeats, restart strategy), but for the checkpoint
//! interval. Needs root (`ip netns`, `iptables`), as CI runs; fails loudly without it.

use std::process::Command;
use std::time::{Duration, Instant};

use crate::processes::{Daemon, status_at, submit_at, wait_for_at};
use crate::recovery::{assert_windows_exact, windows_into_files};
use crate::support::{Scratch, eddy_in_namespace, exclusive, unique};

/// How long a partition lasts: well past the default heartbeat timeout (3 s).
const PARTITION: Duration = Duration::from_secs(8);

/// Runs a command that must succeed, naming it when it does not.
fn run(program: &str, args: &[&str]) {
    let output = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {program} (the partition tests need it): {e}"));
    assert!(
        output.status.success(),
        "{program} {} failed (the partition tests need root, iproute2 and iptables): {}",
        args.join(" "),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Network namespaces joined by a bridge: host `i` is `10.231.{subnet}.{10 + i}`, the
/// machine's own end `10.231.{subnet}.1`. Removed on drop.
struct Network {
    prefix: String,
    subnet: usize,
    hosts: usize,
}

impl Network {
    fn new(hosts: usize) -> Network {
        let n = unique();
        let network = Network {
            prefix: format!("ed{}n{n}", std::process::id() % 100_000),
            subnet: 1 + (std::process::id() as usize * 7 + n) % 250,
            hosts,
        };
        let switch = network.namespace("sw");
        run("ip", &["netns", "add", &switch]);
        run(
            "ip",
            &["-n", &switch, "link", "add", "br0", "type", "bridge"],
        );
        run("ip", &["-n", &switch, "link", "set", "br0", "up"]);
        for i in 0..hosts {
            let namespace = network.namespace(&i.to_string());
            run("ip", &["netns", "add", &namespace]);
            network.link(i.to_string(), Some(&namespace), &network.ip(i));
            run("ip", &["-n", &namespace, "link", "set", "lo", "up"]);
        }
        let own = format!("10.231.{}.1", network.subnet);
        network.link("h".into(), None, &own);
        network
    }

    fn namespace(&self, name: &str) -> String {
        format!("{}-{name}", self.prefix)
    }

    /// Host `i`'s address.
    fn ip(&self, i: usize) -> String {
        format!("10.231.{}.{}", self.subnet, 10 + i)
    }

    /// A veth pair from `namespace` (the machine's own, for `None`) to the bridge, with
    /// `address` on its near end.
    fn link(&self, name: String, namespace: Option<&str>, address: &str) {
        let (near, far) = (
            format!("{}{name}a", self.prefix),
            format!("{}{name}b", self.prefix),
        );
        let switch = self.namespace("sw");
        run(
            "ip",
            &["link", "add", &near, "type", "veth", "peer", "name", &far],
        );
        run("ip", &["link", "set", &far, "netns", &switch]);
        run(
            "ip",
            &["-n", &switch, "link", "set", &far, "master", "br0", "up"],
        );
        let cidr = format!("{address}/24");
        match namespace {
            Some(namespace) => {
                run("ip", &["link", "set", &near, "netns", namespace]);
                run("ip", &["-n", namespace, "addr", "add", &cidr, "dev", &near]);
                run("ip", &["-n", namespace, "link", "set", &near, "up"]);
            }
            None => {
                run("ip", &["addr", "add", &cidr, "dev", &near]);
                run("ip", &["link", "set", &near, "up"]);
            }
        }
    }

    /// Drops, inside host `i`, the packets it receives from (`INPUT`, `-s`) or sends to
    /// (`OUTPUT`, `-d`) host `peer`.
    fn cut(&self, i: usize, chain: &str, peer: usize) {
        let side = if chain == "INPUT" { "-s" } else { "-d" };
        let namespace = self.namespace(&i.to_string());
        let peer = self.ip(peer);
        run(
            "ip",
            &[
                "netns", "exec", &namespace, "iptables", "-A", chain, side, &peer, "-j", "DROP",
            ],
        );
    }

    /// Drops, inside host `i`, the packets it receives from every other host (not from the
    /// machine's own end, where the test's clients are).
    fn cut_from_all(&self, i: usize) {
        let namespace = self.namespace(&i.to_string());
        let (own, subnet) = (
            format!("10.231.{}.1", self.subnet),
            format!("10.231.{}.0/24", self.subnet),
        );
        for (source, verdict) in [(own.as_str(), "ACCEPT"), (subnet.as_str(), "DROP")] {
            run(
                "ip",
                &[
                    "netns", "exec", &namespace, "iptables", "-A", "INPUT", "-s", source, "-j",
                    verdict,
                ],
            );
        }
    }

    /// Lets every packet of host `i` through again.
    fn heal(&self, i: usize) {
        let namespace = self.namespace(&i.to_string());
        for chain in ["INPUT", "OUTPUT"] {
            run(
                "ip",
                &["netns", "exec", &namespace, "iptables", "-F", chain],
            );
        }
    }
}

impl Drop for Network {
    fn drop(&mut self) {
        // Deleting a namespace deletes the veths in it, and with them their peers.
        let mut namespaces: Vec<String> = (0..self.hosts)
            .map(|i| self.namespace(&i.to_string()))
            .collect();
        namespaces.push(self.namespace("sw"));
        for namespace in namespaces {
            let _ = Command::new("ip")
                .args(["netns", "del", &namespace])
                .status();
        }
    }
}

/// A JobManager (host 0) and three TaskManagers of one slot (hosts 1 to 3) in their own
/// namespaces, every option at its default.
struct PartitionedCluster {
    network: Network,
    scratch: Scratch,
    address: String,
    _daemons: Vec<Daemon>,
}

impl PartitionedCluster {
    fn start(name: &str) -> PartitionedCluster {
        let network = Network::new(4);
        let scratch = Scratch::new(name);
        let bind = format!("{}:6123", network.ip(0));
        let checkpoints = scratch.path().join("checkpoints").display().to_string();
        let mut jobmanager = eddy_in_namespace(&network.namespace("0"));
        jobmanager.args(["jobmanager", "--insecure", "--bind", &bind]);
        jobmanager.args(["--checkpoint-dir", &checkpoints]);
        let mut daemons = vec![Daemon::spawn(jobmanager)];
        let address = format!("http://{bind}");
        for i in 1..4 {
            let mut taskmanager = eddy_in_namespace(&network.namespace(&i.to_string()));
            let bind = format!("{}:0", network.ip(i));
            taskmanager.args(["taskmanager", "--insecure", "--jobmanager", &address]);
            taskmanager.args(["--bind", &bind, "--slots", "1", "--id", &format!("tm-{i}")]);
            daemons.push(Daemon::spawn(taskmanager));
        }
        PartitionedCluster {
            network,
            scratch,
            address,
            _daemons: daemons,
        }
    }

    /// Submits the exactly-once windows job into `output` at parallelism 2; returns its id
    /// once it runs.
    fn submit_windows(&self, output: &std::path::Path) -> String {
        let script = format!(
            "SET 'execution.checkpointing.interval' = '500ms';
             {}",
            windows_into_files("", output, 400_000, 20_000)
        );
        let deadline = Instant::now() + Duration::from_secs(60);
        let job = loop {
            match submit_at(
                &self.address,
                &self.scratch,
                &script,
                &["--parallelism", "2"],
            ) {
                Ok(job) => break job,
                Err(error) if Instant::now() < deadline => {
                    eprintln!("not submitted yet: {error}");
                    std::thread::sleep(Duration::from_millis(500));
                }
                Err(error) => panic!("the partitioned cluster took no job: {error}"),
            }
        };
        wait_for_at(&self.address, &job, "RUNNING", Duration::from_secs(60));
        job
    }

    /// The host of a TaskManager that runs a task of `job`.
    fn busy_taskmanager(&self, job: &str) -> usize {
        let status = status_at(&self.address, job);
        let busy = status["vertices"][0]["subtasks"][0]["taskmanager"]
            .as_str()
            .unwrap_or_else(|| panic!("no task placed: {status}"));
        busy.trim_start_matches("tm-").parse().unwrap()
    }

    /// Waits for the job to finish; its windows must equal a failure-free run's, each
    /// once, and no file may be left hidden. Returns its restarts.
    fn assert_exact(&self, job: &str, output: &std::path::Path) -> u64 {
        let status = wait_for_at(&self.address, job, "FINISHED", Duration::from_secs(180));
        assert_windows_exact(&self.scratch, output);
        status["restarts"].as_u64().unwrap_or(0)
    }
}

/// Cuts `host` from `peer` one way (`chain`) for [`PARTITION`], once the job has
/// checkpointed, then heals it; the job must end exact. Returns the job's restarts.
fn partition_and_heal(
    name: &str,
    chain: &str,
    cut: impl Fn(&PartitionedCluster, &str) -> (usize, usize),
) -> u64 {
    cut_and_heal(name, |cluster, job| {
        let (host, peer) = cut(cluster, job);
        eprintln!("partition: host {host} drops {chain} packets of host {peer}");
        cluster.network.cut(host, chain, peer);
        host
    })
}

/// Runs the windows job, makes a partition with `cut` (returning the host it cut) once
/// the job has checkpointed, and heals it after [`PARTITION`]; the job must end exact.
/// Returns the job's restarts.
fn cut_and_heal(name: &str, cut: impl Fn(&PartitionedCluster, &str) -> usize) -> u64 {
    let _heavy = exclusive();
    let cluster = PartitionedCluster::start(name);
    let output = cluster.scratch.path().join("windows");
    let job = cluster.submit_windows(&output);
    std::thread::sleep(Duration::from_secs(3));
    let host = cut(&cluster, &job);
    std::thread::sleep(PARTITION);
    cluster.network.heal(host);
    eprintln!("partition healed");
    cluster.assert_exact(&job, &output)
}

/// The JobManager cannot reach a TaskManager running the job (the TaskManager drops what
/// the JobManager sends) while the TaskManager still reaches the disk and the other
/// TaskManagers: the JobManager loses it and restarts the job elsewhere; the cut-off
/// TaskManager's tasks write on until it is told, and commit nothing.
#[test]
fn a_taskmanager_the_jobmanager_cannot_reach() {
    let restarts = partition_and_heal("partition-jm-to-tm", "INPUT", |cluster, job| {
        (cluster.busy_taskmanager(job), 0)
    });
    assert!(restarts >= 1, "the lost TaskManager went unnoticed");
}

/// The other way round: a TaskManager running the job cannot reach the JobManager (what
/// it sends is dropped), while the JobManager's packets still arrive.
#[test]
fn a_taskmanager_that_cannot_reach_the_jobmanager() {
    let restarts = partition_and_heal("partition-tm-to-jm", "OUTPUT", |cluster, job| {
        (cluster.busy_taskmanager(job), 0)
    });
    assert!(restarts >= 1, "the lost TaskManager went unnoticed");
}

/// The JobManager cannot hear one of the TaskManagers running the job, which still hears
/// it and reaches the disk.
#[test]
fn a_jobmanager_deaf_to_a_taskmanager() {
    partition_and_heal("partition-jm-deaf", "INPUT", |cluster, job| {
        (0, cluster.busy_taskmanager(job))
    });
}

/// The JobManager's packets to one of the TaskManagers running the job are dropped at the
/// JobManager, which still receives what that TaskManager sends.
#[test]
fn a_jobmanager_mute_to_a_taskmanager() {
    partition_and_heal("partition-jm-mute", "OUTPUT", |cluster, job| {
        (0, cluster.busy_taskmanager(job))
    });
}

/// The JobManager hears none of its TaskManagers (they still hear it, reach the disk and
/// each other): it loses them all, and the job waits for slots until the partition heals.
#[test]
fn a_jobmanager_deaf_to_every_taskmanager() {
    let restarts = cut_and_heal("partition-jm-alone", |cluster, _| {
        eprintln!("partition: the JobManager drops what every TaskManager sends");
        cluster.network.cut_from_all(0);
        0
    });
    assert!(restarts >= 1, "the lost TaskManagers went unnoticed");
}
