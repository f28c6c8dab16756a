//! A TaskManager as a JobManager taking its run over sees it: the tasks it holds, and a
//! checkpoint triggered twice (by a deposed leader, then by its successor) taken once.

use std::time::Instant;

use async_trait::async_trait;
use eddy_planner::plan::plan_job;
use eddy_planner::sql::compile;

use eddy_planner::plan::fingerprint::BUILD;

use super::*;
use crate::gateway::Registration;

/// A JobManager that keeps the acknowledgements and takes everything else.
#[derive(Default)]
struct Acks(Mutex<Vec<pb::CheckpointAck>>);

#[async_trait]
impl ResourceManagerGateway for Acks {
    async fn register(&self, _: pb::RegisterTaskManagerRequest) -> Result<Registration, CallError> {
        Err(CallError::Unavailable("not in this test".into()))
    }
    async fn heartbeat(&self, _: pb::HeartbeatRequest) -> Result<(), CallError> {
        Ok(())
    }
    async fn report_task_state(&self, _: pb::TaskStateReport) -> Result<(), CallError> {
        Ok(())
    }
    async fn acknowledge_checkpoint(&self, ack: pb::CheckpointAck) -> Result<(), CallError> {
        self.0.lock().unwrap().push(ack);
        Ok(())
    }
}

/// An unbounded source into a grouping (two vertices at parallelism 1), checkpointing
/// under `root`, all on `node`.
fn deployment(node: &TaskManager, root: &str) -> (pb::DeployTasksRequest, Arc<JobGraph>) {
    let sql = "SET 'execution.checkpointing.interval' = '1h';
        CREATE TABLE src (id BIGINT) WITH ('connector' = 'datagen', 'rows-per-second' = '100');
        CREATE TABLE out (id BIGINT, n BIGINT) WITH ('connector' = 'blackhole');
        INSERT INTO out SELECT id, COUNT(*) FROM src GROUP BY id;";
    let graph = Arc::new(
        plan_job(&compile(sql, &[], eddy_planner::PlanningContext::CHECKING).unwrap()).unwrap(),
    );
    let execution = ExecutionId::new("job", 1);
    let tasks: Vec<pb::TaskId> = graph
        .vertices
        .iter()
        .map(|v| task_id(&execution, TaskKey::new(v.id, 0)))
        .collect();
    let locations = tasks
        .iter()
        .map(|task| pb::TaskLocation {
            task: Some(task.clone()),
            address: node.address().to_string(),
        })
        .collect();
    let request = pb::DeployTasksRequest {
        execution_id: execution.to_string(),
        sql: sql.into(),
        options: Default::default(),
        vertex_parallelism: graph
            .vertices
            .iter()
            .map(|v| v.parallelism as u32)
            .collect(),
        tasks,
        locations,
        checkpoint_root: root.into(),
        checkpoint_job: "job".into(),
        restore_checkpoint: 0,
        restore_path: String::new(),
        plan: Some(fingerprint(&graph)),
    };
    (request, graph)
}

/// The JobManager's fingerprint of `graph`, as a request carries it.
fn fingerprint(graph: &JobGraph) -> pb::PlanFingerprint {
    let fingerprint = graph.fingerprint();
    pb::PlanFingerprint {
        build: fingerprint.build,
        plan: fingerprint.plan,
        state_formats: fingerprint.state_formats,
    }
}

fn barrier(checkpoint: u64) -> Barrier {
    Barrier {
        checkpoint,
        triggered_at: 0,
        unaligned: false,
    }
}

#[tokio::test]
async fn a_run_is_held_whole_and_a_checkpoint_triggered_twice_is_taken_once() {
    let dir = std::env::temp_dir().join(format!("eddy-node-held-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let acks = Arc::new(Acks::default());
    let node = TaskManager::new(
        "tm-test".into(),
        "http://127.0.0.1:1".into(),
        1,
        acks.clone(),
        Arc::new(Channels::new(CHANNEL_CAPACITY)),
        None,
    );
    let (request, graph) = deployment(&node, dir.to_str().unwrap());
    let tasks = graph.vertices.len();
    assert!(tasks >= 2, "{}", graph.explain());
    node.deploy(request, Some(graph)).await.unwrap();
    let held = node.held_tasks();
    assert_eq!(held.len(), tasks, "every task is held: {held:?}");
    assert!(
        held.iter()
            .all(|t| t.newest_checkpoint == 0 && !t.input_ended)
    );

    // A deposed leader triggered checkpoint 3; its successor, taking over, triggers 3 again
    // (and a straggler 2): the sources emit barrier 3 once, so each task snapshots once.
    let execution = ExecutionId::new("job", 1);
    for checkpoint in [3, 3, 2] {
        node.trigger(&execution, barrier(checkpoint)).unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    while acks.0.lock().unwrap().len() < tasks {
        assert!(Instant::now() < deadline, "the tasks did not acknowledge");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let taken: Vec<(u64, u32)> = acks
        .0
        .lock()
        .unwrap()
        .iter()
        .map(|ack| (ack.checkpoint, ack.task.as_ref().unwrap().vertex))
        .collect();
    assert_eq!(
        taken.len(),
        tasks,
        "one acknowledgement per task: {taken:?}"
    );
    assert!(
        taken.iter().all(|(checkpoint, _)| *checkpoint == 3),
        "{taken:?}"
    );
    assert!(node.held_tasks().iter().all(|t| t.newest_checkpoint == 3));

    node.cancel_all().await;
    assert!(node.held_tasks().is_empty(), "a cancelled run is not held");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A TaskManager plans the job from the request's script itself and refuses it when its
/// plan is not the JobManager's (another build, a planner that saw something else): the
/// error names both builds and the first line where the plans differ. Nothing is deployed.
#[tokio::test]
async fn a_plan_that_is_not_the_jobmanagers_is_refused_naming_both() {
    let node = TaskManager::new(
        "tm-test".into(),
        "http://127.0.0.1:1".into(),
        1,
        Arc::new(Acks::default()),
        Arc::new(Channels::new(CHANNEL_CAPACITY)),
        None,
    );
    let (request, _) = deployment(&node, "");
    let jobmanager = request.plan.clone().unwrap();
    let tampered = |edit: &dyn Fn(&mut pb::PlanFingerprint)| {
        let mut request = request.clone();
        edit(request.plan.as_mut().unwrap());
        request
    };
    let cases: Vec<(pb::DeployTasksRequest, Vec<&str>)> = vec![
        (
            tampered(&|plan| plan.plan = plan.plan.replace("count(Int64(1))", "sum(src.id)")),
            vec![
                "planned a different job graph",
                "sum(src.id)",
                "count(Int64(1))",
            ],
        ),
        (
            tampered(&|plan| {
                plan.build = "eddy 9.9.9".into();
                plan.state_formats = plan.state_formats.replace("join=", "join=9");
            }),
            vec!["eddy 9.9.9", BUILD, "other formats"],
        ),
        (
            pb::DeployTasksRequest {
                plan: None,
                ..request.clone()
            },
            vec!["carries no plan"],
        ),
    ];
    for (request, expected) in cases {
        let error = node.deploy(request, None).await.unwrap_err().to_string();
        for text in expected {
            assert!(error.contains(text), "{text}: {error}");
        }
        assert!(node.held_tasks().is_empty(), "nothing runs after a refusal");
    }
    // The JobManager's own plan passes.
    let request = pb::DeployTasksRequest {
        plan: Some(jobmanager),
        ..request
    };
    node.deploy(request, None).await.unwrap();
    assert!(!node.held_tasks().is_empty());
}
