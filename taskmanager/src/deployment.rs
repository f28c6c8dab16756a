//! What a TaskManager makes of a deployment request before its tasks start: the job graph
//! (checked against the JobManager's), which tasks run here and where the others run, the
//! checkpoint storage, the state each task restores, and the channels that connect them.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use eddy_common::checkpoint::{CheckpointDir, CheckpointStorage};
use eddy_common::error::CallError;
use eddy_common::ids::{ExecutionId, TaskKey};
use eddy_common::object_storage::resolve;
use eddy_planner::plan::JobGraph;
use eddy_planner::plan::fingerprint::{BUILD, PlanFingerprint};
use eddy_proto::v1 as pb;

use crate::exchange::{InputChannel, OutputChannel, channels};
use crate::network::{ChannelKey, Channels, remote_sender};
use crate::node::CHANNEL_CAPACITY;
use crate::restore::{TaskRestore, VertexRestore};

/// A deployment request, checked and resolved.
pub struct DeploymentPlan {
    /// The run of the job.
    pub execution: ExecutionId,
    /// Its graph.
    pub graph: Arc<JobGraph>,
    /// The tasks that run here.
    pub mine: BTreeSet<TaskKey>,
    /// Where every task of the job runs (its TaskManager's data exchange address).
    pub locations: HashMap<TaskKey, String>,
    /// Where the job's checkpoints go, if it checkpoints.
    pub checkpointing: Option<CheckpointStorage>,
    request: pb::DeployTasksRequest,
}

fn refused(what: impl std::fmt::Display) -> CallError {
    CallError::Refused(what.to_string())
}

/// Checks that `graph`, planned here, is the JobManager's (`jobmanager`): a TaskManager of
/// another build, or whose planner saw something else, refuses the job naming both.
fn check_plan(graph: &JobGraph, jobmanager: Option<&pb::PlanFingerprint>) -> Result<(), CallError> {
    let jobmanager = jobmanager.ok_or_else(|| {
        refused(format!(
            "the deployment carries no plan to check against: the JobManager's build is \
             older than this TaskManager's ({BUILD})"
        ))
    })?;
    let jobmanager = PlanFingerprint {
        build: jobmanager.build.clone(),
        plan: jobmanager.plan.clone(),
        state_formats: jobmanager.state_formats.clone(),
    };
    graph.fingerprint().check(&jobmanager).map_err(refused)
}

impl DeploymentPlan {
    /// Checks `request`: its graph (`planned`, or planned here from its SQL, which must be
    /// the JobManager's plan), its tasks and their locations.
    pub fn new(
        request: pb::DeployTasksRequest,
        planned: Option<Arc<JobGraph>>,
    ) -> Result<Self, CallError> {
        let execution: ExecutionId = request.execution_id.parse().map_err(refused)?;
        let graph = match planned {
            Some(graph) => graph,
            None => {
                let options: Vec<(String, String)> = request.options.clone().into_iter().collect();
                // This TaskManager opens the plan's connections: it reads their secrets.
                let context = eddy_planner::PlanningContext::CONNECTING;
                Arc::new(eddy_planner::plan(&request.sql, &options, context).map_err(refused)?)
            }
        };
        check_plan(&graph, request.plan.as_ref())?;
        let parallelism: Vec<u32> = graph
            .vertices
            .iter()
            .map(|v| v.parallelism as u32)
            .collect();
        if parallelism != request.vertex_parallelism {
            return Err(refused(format!(
                "this TaskManager planned vertex parallelism {parallelism:?}, the JobManager {:?}",
                request.vertex_parallelism
            )));
        }
        let mut locations = HashMap::new();
        for location in &request.locations {
            let task = location
                .task
                .as_ref()
                .ok_or_else(|| refused("a location without a task"))?;
            locations.insert(task_key(task), location.address.clone());
        }
        let mine: BTreeSet<TaskKey> = request.tasks.iter().map(task_key).collect();
        if let Some(bad) = mine.iter().find(|key| {
            graph
                .vertices
                .get(key.vertex)
                .is_none_or(|v| key.subtask >= v.parallelism)
        }) {
            return Err(refused(format!("the job has no task {bad}")));
        }
        let checkpointing = match graph.config.checkpoints.interval.is_some()
            && !request.checkpoint_root.is_empty()
        {
            false => None,
            true => {
                let root = resolve(&request.checkpoint_root, &[]).map_err(refused)?;
                Some(CheckpointStorage::new(&root, &request.checkpoint_job))
            }
        };
        Ok(DeploymentPlan {
            execution,
            graph,
            mine,
            locations,
            checkpointing,
            request,
        })
    }

    /// The directory the tasks restore from: a savepoint (or retained checkpoint) path, a
    /// checkpoint of the job, or none.
    fn restore_directory(&self) -> Result<Option<CheckpointDir>, CallError> {
        let request = &self.request;
        match (request.restore_path.is_empty(), request.restore_checkpoint) {
            (false, _) => {
                let location = resolve(&request.restore_path, &[]).map_err(refused)?;
                Ok(Some(CheckpointDir::new(location)))
            }
            (true, 0) => Ok(None),
            (true, checkpoint) => {
                let storage = self
                    .checkpointing
                    .as_ref()
                    .ok_or_else(|| refused("a restore without checkpoint storage"))?;
                Ok(Some(storage.directory(checkpoint)))
            }
        }
    }

    /// Reads what every task here restores, before any of them starts: each vertex's
    /// snapshots once, checked (size, CRC-32) as they are read.
    pub async fn read_restores(&self) -> Result<HashMap<TaskKey, TaskRestore>, CallError> {
        let mut restores = HashMap::new();
        let Some(directory) = self.restore_directory()? else {
            return Ok(restores);
        };
        let cannot = |e: eddy_common::EddyError| refused(format!("cannot restore: {e}"));
        let metadata = directory.metadata().await.map_err(cannot)?;
        let own_checkpoint = self.request.restore_path.is_empty();
        let vertices: HashSet<usize> = self.mine.iter().map(|key| key.vertex).collect();
        for vertex in vertices {
            let parallelism = self.graph.vertices[vertex].parallelism;
            let restore =
                VertexRestore::load(&directory, &metadata, vertex, parallelism, own_checkpoint)
                    .await
                    .map_err(cannot)?;
            for key in self.mine.iter().filter(|key| key.vertex == vertex) {
                restores.insert(*key, restore.for_subtask(key.subtask));
            }
        }
        Ok(restores)
    }
}

/// The input and output channels of the tasks here.
pub struct TaskWiring {
    inputs: HashMap<TaskKey, Vec<InputChannel>>,
    outputs: HashMap<TaskKey, Vec<OutputChannel>>,
}

impl TaskWiring {
    /// Connects every channel that starts or ends at a task here: inputs come from this
    /// TaskManager's queues; outputs go into the queue of a task reached at `address` (this
    /// TaskManager's, or one sharing its channels in-process), or over the network.
    pub fn connect(
        plan: &DeploymentPlan,
        queues: &Channels,
        address: &str,
    ) -> Result<Self, CallError> {
        let mut wiring = TaskWiring {
            inputs: HashMap::new(),
            outputs: HashMap::new(),
        };
        let taken_twice = || CallError::Refused("a channel was taken twice".into());
        for ends in channels(&plan.graph) {
            let key = ChannelKey {
                execution_id: plan.execution.to_string(),
                ends,
            };
            let to = TaskKey::new(ends.to_vertex, ends.to_subtask);
            if plan.mine.contains(&to) {
                let mut receiver = queues.take_receiver(&key).ok_or_else(taken_twice)?;
                receiver.input = ends.input_index(&plan.graph);
                wiring.inputs.entry(to).or_default().push(receiver);
            }
            let from = TaskKey::new(ends.from_vertex, ends.from_subtask);
            if plan.mine.contains(&from) {
                let target = plan
                    .locations
                    .get(&to)
                    .ok_or_else(|| refused(format!("no location for task {to}")))?;
                let sender = if target == address {
                    queues.take_sender(&key).ok_or_else(taken_twice)?
                } else {
                    remote_sender(target.clone(), key, CHANNEL_CAPACITY, queues.tls().cloned())
                };
                wiring.outputs.entry(from).or_default().push(sender);
            }
        }
        Ok(wiring)
    }

    /// The input and output channels of task `key`.
    pub fn take(&mut self, key: TaskKey) -> (Vec<InputChannel>, Vec<OutputChannel>) {
        (
            self.inputs.remove(&key).unwrap_or_default(),
            self.outputs.remove(&key).unwrap_or_default(),
        )
    }
}

/// A task as messages name it, within its execution.
pub fn task_key(task: &pb::TaskId) -> TaskKey {
    TaskKey::new(task.vertex as usize, task.subtask as usize)
}
