//! The TaskManager: runs subtasks in its slots, chains their operators, and moves data
//! and in-band events between them, inside one process or across TaskManagers.

pub mod chain;
pub mod chains;
pub mod daemon;
pub mod exchange;
pub mod input;
pub mod network;
pub mod output;
pub mod restore;
pub mod service;
pub mod task;

use std::sync::Arc;

use eddy_common::Result;
use tokio::task::JoinHandle;

pub use task::{
    StopRequest, StopSignal, TaskAck, TaskCheckpointing, TaskCounters, TaskDeployment, TaskEnd,
    TaskRestore, VertexRestore,
};

/// An in-process TaskManager of the embedded cluster: a number of slots, each running one
/// parallel slice of a job.
#[derive(Debug)]
pub struct TaskManager {
    id: String,
    slots: usize,
}

impl TaskManager {
    /// A TaskManager named `id` with `slots` slots.
    pub fn new(id: impl Into<String>, slots: usize) -> Arc<Self> {
        Arc::new(TaskManager {
            id: id.into(),
            slots,
        })
    }

    /// Its id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// How many slots it offers.
    pub fn slots(&self) -> usize {
        self.slots
    }

    /// Starts a subtask; the handle yields how it ended.
    pub fn deploy(
        &self,
        deployment: TaskDeployment,
        stop: StopSignal,
    ) -> JoinHandle<Result<TaskEnd>> {
        let name = deployment.name();
        tracing::debug!(taskmanager = %self.id, task = %name, "deploying");
        tokio::spawn(task::run_task(deployment, stop))
    }
}
