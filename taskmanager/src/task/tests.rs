//! Tasks of a real job (a Nexmark source, an exchange, an exactly-once file sink) run
//! in-process, with the test in the JobManager's place: it triggers checkpoints, takes
//! the acknowledgements and declares checkpoints complete.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use eddy_common::checkpoint::{CheckpointStorage, CompletedCheckpoint};
use eddy_common::event::{Barrier, StreamEnd};
use eddy_common::ids::{ExecutionId, TaskKey};
use eddy_common::metrics::JobMetrics;
use eddy_common::object_storage::resolve;
use eddy_planner::plan::{JobGraph, plan_job};
use eddy_planner::sql::compile;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::*;
use crate::exchange::LocalChannels;
use crate::snapshot_chain::SnapshotChains;

/// Two scans of one bounded, paced Nexmark table into one exactly-once file sink: the
/// union is a vertex of its own, so rows reach the sink through channels.
fn graph(output: &Path) -> JobGraph {
    let sql = format!(
        "SET 'execution.checkpointing.interval' = '1h';
         CREATE TABLE bid (auction BIGINT, price BIGINT) WITH ('connector' = 'nexmark',
           'nexmark.table' = 'bid', 'events.num' = '2000000', 'events.rate' = '20000');
         CREATE TABLE out (auction BIGINT, price BIGINT) WITH ('connector' = 'filesystem',
           'path' = '{}', 'format' = 'csv', 'sink.delivery-guarantee' = 'exactly-once');
         INSERT INTO out SELECT auction, price FROM bid WHERE price < 5000
           UNION ALL SELECT auction, price FROM bid WHERE price >= 5000;",
        output.display()
    );
    let graph =
        plan_job(&compile(&sql, &[], eddy_planner::PlanningContext::CHECKING).unwrap()).unwrap();
    assert_eq!(
        graph.vertices.len(),
        3,
        "two sources and the union with the sink"
    );
    graph
}

/// The test's side of the tasks: their triggers, acknowledgements, completion notices
/// and stop signal.
struct Job {
    tasks: Vec<JoinHandle<Result<TaskEnd>>>,
    triggers: Vec<UnboundedSender<Barrier>>,
    acks: UnboundedReceiver<TaskAck>,
    completed: watch::Sender<CompletedCheckpoint>,
    stop: watch::Sender<Option<StopRequest>>,
    counters: Vec<Arc<TaskMetrics>>,
}

impl Job {
    fn start(graph: JobGraph, checkpoints: &Path) -> Job {
        let graph = Arc::new(graph);
        let storage =
            CheckpointStorage::new(&resolve(checkpoints.to_str().unwrap(), &[]).unwrap(), "job");
        let mut channels = LocalChannels::for_job(&graph, 8);
        let (acks_tx, acks) = unbounded_channel();
        let (input_ended, _ended) = unbounded_channel();
        let (completed, _) = watch::channel(CompletedCheckpoint::default());
        let (stop, stop_rx) = watch::channel(None);
        let metrics = Arc::new(JobMetrics::default());
        let (mut tasks, mut triggers, mut counters) = (Vec::new(), Vec::new(), Vec::new());
        for vertex in &graph.vertices {
            let trigger = vertex.source.is_some().then(|| {
                let (tx, rx) = unbounded_channel();
                triggers.push(tx);
                rx
            });
            let task_counters = Arc::new(TaskMetrics::new(metrics.clone()));
            counters.push(task_counters.clone());
            let deployment = TaskDeployment {
                graph: graph.clone(),
                vertex: vertex.id,
                subtask: 0,
                inputs: channels.take_inputs(TaskKey::new(vertex.id, 0)),
                outputs: channels.take_outputs(TaskKey::new(vertex.id, 0)),
                metrics: task_counters,
                checkpointing: Some(TaskCheckpointing {
                    storage: storage.clone(),
                    mode: graph.config.checkpoints.mode,
                    triggers: trigger,
                    acks: acks_tx.clone(),
                    completed: completed.subscribe(),
                    input_ended: input_ended.clone(),
                    chains: SnapshotChains::new(false),
                }),
                restore: None,
                execution: ExecutionId::new("job", 1),
            };
            tasks.push(tokio::spawn(run_task(deployment, stop_rx.clone())));
        }
        Job {
            tasks,
            triggers,
            acks,
            completed,
            stop,
            counters,
        }
    }

    /// Takes checkpoint `n` and waits until every task acknowledged it.
    async fn checkpoint(&mut self, n: u64) {
        let barrier = Barrier {
            checkpoint: n,
            triggered_at: 0,
            unaligned: false,
        };
        for trigger in &self.triggers {
            trigger.send(barrier).unwrap();
        }
        for _ in 0..self.tasks.len() {
            let ack = tokio::time::timeout(Duration::from_secs(20), self.acks.recv()).await;
            let ack = ack.expect("an acknowledgement in time").unwrap();
            assert_eq!(ack.checkpoint, n);
            ack.result.expect("a stored snapshot");
        }
    }

    /// Rows the sink task has taken in.
    fn sink_rows(&self) -> u64 {
        self.counters.last().unwrap().sample().records_in
    }

    async fn ends(self) -> Vec<TaskEnd> {
        let mut ends = Vec::new();
        for task in self.tasks {
            ends.push(task.await.unwrap().unwrap());
        }
        ends
    }
}

/// The lines of the visible part files, and the names of the hidden ones.
fn files(directory: &Path) -> (usize, Vec<String>) {
    let (mut lines, mut hidden) = (0, Vec::new());
    for entry in std::fs::read_dir(directory).into_iter().flatten() {
        let entry = entry.unwrap();
        let name = entry.file_name().to_string_lossy().into_owned();
        match name.starts_with('.') {
            true => hidden.push(name),
            false => {
                lines += std::fs::read_to_string(entry.path())
                    .unwrap()
                    .lines()
                    .count()
            }
        }
    }
    (lines, hidden)
}

async fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("eddy-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The hole of a replaced JobManager: the tasks of an attempt are stopped or cancelled
/// while the sink has written rows after the last completed checkpoint. Their end reaches
/// the sink as the end of its input; it must roll those rows back (a restore from the
/// checkpoint replays them), not commit them as if the input had finished.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_or_cancelled_job_commits_nothing_its_restore_would_write_again() {
    for (request, expected) in [
        (StopRequest::Cancel, StreamEnd::Cancelled),
        (StopRequest::Drain, StreamEnd::Stopped),
    ] {
        let dir = scratch(&format!("stopped-sink-{request:?}"));
        let output = dir.join("out");
        let mut job = Job::start(graph(&output), &dir.join("checkpoints"));
        wait_until("the sink has rows", || job.sink_rows() > 0).await;
        job.checkpoint(1).await;
        job.completed.send_replace(CompletedCheckpoint {
            checkpoint: 1,
            end_of_input: false,
        });
        wait_until("checkpoint 1 is committed", || files(&output).0 > 0).await;
        let (committed, _) = files(&output);
        // More rows reach the sink after checkpoint 1; no checkpoint covers them.
        let at_commit = job.sink_rows();
        wait_until("rows after the checkpoint", || {
            job.sink_rows() > at_commit + 1000
        })
        .await;
        job.stop.send_replace(Some(request));
        let ends = job.ends().await;
        assert_eq!(ends.last(), Some(&expected), "{request:?}: the sink's end");
        let (visible, hidden) = files(&output);
        assert_eq!(
            visible, committed,
            "{request:?}: rows no completed checkpoint covers became visible"
        );
        assert!(
            hidden.is_empty(),
            "{request:?}: files left behind: {hidden:?}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
