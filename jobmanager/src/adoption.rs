//! Adopting a run another JobManager deployed. After a leader change (or a JobManager
//! restart) the TaskManagers register again with the tasks they still run. A run whose
//! every task is still running, and which is the job's last recorded attempt, continues
//! under the new JobManager: its state is exactly what its last committed checkpoint plus
//! the rows read since made it, so nothing need restart. Otherwise (a task ended or is
//! missing when the window closes) the job restarts from its last committed checkpoint as
//! before, and the tasks that were held are cancelled.

use std::collections::{BTreeMap, BTreeSet};

use eddy_common::checkpoint::{CompletedCheckpoint, RestartPoint};
use eddy_common::ids::TaskKey;
use eddy_planner::plan::JobGraph;

/// A task of the run to adopt, as a TaskManager holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldTask {
    /// The TaskManager running it.
    pub taskmanager: String,
    /// A source task that has read all its input.
    pub input_ended: bool,
}

/// A recovered job's run waiting to be adopted: what its commit log said when this
/// JobManager claimed it, and the tasks the TaskManagers hold so far.
#[derive(Debug, Clone, Default)]
pub struct Adoption {
    /// The newest committed checkpoint (its sinks may not have heard of it yet).
    pub committed: Option<CompletedCheckpoint>,
    /// The newest checkpoint id in storage or triggered at a held task: the adopted run
    /// numbers its checkpoints after it.
    newest_id: u64,
    held: BTreeMap<TaskKey, HeldTask>,
    /// Two TaskManagers said they run one task: this is not one run.
    conflicting: bool,
}

impl Adoption {
    /// Waits for the tasks of a run whose job's log names `point`.
    pub fn new(point: &RestartPoint) -> Self {
        Adoption {
            committed: point.checkpoint.as_ref().map(|m| CompletedCheckpoint {
                checkpoint: m.checkpoint,
                end_of_input: m.end_of_input,
            }),
            newest_id: point.newest_id,
            held: BTreeMap::new(),
            conflicting: false,
        }
    }

    /// Takes task `key` as held by `task.taskmanager`, triggered up to checkpoint
    /// `newest_checkpoint` there; false when another TaskManager holds it already (the run
    /// is then not one run any more, and is not adopted).
    pub fn hold(&mut self, key: TaskKey, task: HeldTask, newest_checkpoint: u64) -> bool {
        self.newest_id = self.newest_id.max(newest_checkpoint);
        match self.held.get(&key) {
            Some(other) if other.taskmanager != task.taskmanager => {
                self.conflicting = true;
                false
            }
            _ => {
                self.held.insert(key, task);
                true
            }
        }
    }

    /// Task `key` ended (it failed, or was stopped): the run cannot be adopted whole.
    pub fn lost(&mut self, key: TaskKey) {
        self.held.remove(&key);
    }

    /// TaskManager `taskmanager` is gone, and the tasks it held with it.
    pub fn forget_taskmanager(&mut self, taskmanager: &str) {
        self.held.retain(|_, task| task.taskmanager != taskmanager);
    }

    /// A held source task has read all its input.
    pub fn input_ended(&mut self, key: TaskKey) {
        if let Some(task) = self.held.get_mut(&key) {
            task.input_ended = true;
        }
    }

    /// The tasks held so far.
    pub fn held(&self) -> &BTreeMap<TaskKey, HeldTask> {
        &self.held
    }

    /// The TaskManagers holding tasks of the run.
    pub fn taskmanagers(&self) -> BTreeSet<String> {
        self.held.values().map(|t| t.taskmanager.clone()).collect()
    }

    /// The id of the adopted run's first checkpoint: after every id used.
    pub fn next_checkpoint(&self) -> u64 {
        self.newest_id + 1
    }

    /// The run's slots once every task of `graph` is held, with the slot sharing every
    /// deployment has (slot `k` on one TaskManager runs subtask `k` of every vertex);
    /// `None` while a task is missing, or if the tasks do not sit that way.
    pub fn slots(&self, graph: &JobGraph) -> Option<Vec<String>> {
        if self.conflicting {
            return None;
        }
        let mut slots: Vec<Option<&str>> = vec![None; graph.slots_needed()];
        let mut expected = 0;
        for vertex in &graph.vertices {
            for subtask in 0..vertex.parallelism {
                expected += 1;
                let task = self.held.get(&TaskKey::new(vertex.id, subtask))?;
                let slot = slots.get_mut(subtask)?;
                match slot {
                    Some(taskmanager) if *taskmanager != task.taskmanager => return None,
                    _ => *slot = Some(&task.taskmanager),
                }
            }
        }
        if self.held.len() != expected {
            return None;
        }
        slots
            .into_iter()
            .map(|slot| slot.map(str::to_string))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use eddy_common::checkpoint::CheckpointMetadata;
    use eddy_planner::plan::plan_job;
    use eddy_planner::sql::compile;

    /// A job of two vertices at parallelism 2 (a source and a sink of its own).
    fn graph() -> JobGraph {
        let sql = "
            SET 'parallelism.default' = '2';
            CREATE TABLE src (id BIGINT) WITH ('connector' = 'datagen', 'number-of-rows' = '10');
            CREATE TABLE out (id BIGINT, n BIGINT) WITH ('connector' = 'blackhole');
            INSERT INTO out SELECT id, COUNT(*) FROM src GROUP BY id;";
        plan_job(&compile(sql, &[], eddy_planner::PlanningContext::CHECKING).unwrap()).unwrap()
    }

    fn held(taskmanager: &str) -> HeldTask {
        HeldTask {
            taskmanager: taskmanager.into(),
            input_ended: false,
        }
    }

    fn point(committed: Option<u64>, newest_id: u64) -> RestartPoint {
        RestartPoint {
            checkpoint: committed.map(|checkpoint| CheckpointMetadata {
                checkpoint,
                completed_at_ms: 0,
                vertex_parallelism: Vec::new(),
                tasks: Vec::new(),
                end_of_input: false,
            }),
            newest_id,
        }
    }

    /// Every task of `graph`, subtask `k` on `taskmanagers[k]`.
    fn hold_all(adoption: &mut Adoption, graph: &JobGraph, taskmanagers: &[&str]) {
        for vertex in &graph.vertices {
            for (subtask, taskmanager) in taskmanagers.iter().take(vertex.parallelism).enumerate() {
                let key = TaskKey::new(vertex.id, subtask);
                assert!(adoption.hold(key, held(taskmanager), 0));
            }
        }
    }

    #[test]
    fn a_run_is_adopted_once_every_task_is_held_in_its_slots() {
        let graph = graph();
        assert!(graph.vertices.len() >= 2, "{}", graph.explain());
        let mut adoption = Adoption::new(&point(Some(4), 5));
        assert_eq!(adoption.slots(&graph), None);
        hold_all(&mut adoption, &graph, &["tm-a", "tm-b"]);
        assert_eq!(
            adoption.slots(&graph),
            Some(vec!["tm-a".to_string(), "tm-b".to_string()])
        );
        assert_eq!(adoption.committed.map(|c| c.checkpoint), Some(4));
        assert_eq!(adoption.next_checkpoint(), 6);
    }

    #[test]
    fn a_run_missing_a_task_or_with_a_slot_split_is_not_adopted() {
        let graph = graph();
        let mut adoption = Adoption::new(&point(None, 0));
        hold_all(&mut adoption, &graph, &["tm-a", "tm-b"]);
        adoption.lost(TaskKey::new(0, 1));
        assert_eq!(adoption.slots(&graph), None, "a task ended");

        let mut split = Adoption::new(&point(None, 0));
        hold_all(&mut split, &graph, &["tm-a", "tm-b"]);
        // Subtask 1 of the last vertex sits beside subtask 0 instead of in slot 1.
        let last = graph.vertices.last().unwrap().id;
        split.lost(TaskKey::new(last, 1));
        assert!(split.hold(TaskKey::new(last, 1), held("tm-a"), 0));
        assert_eq!(
            split.slots(&graph),
            None,
            "slot 1 split over two TaskManagers"
        );
    }

    #[test]
    fn a_task_held_by_two_taskmanagers_is_refused() {
        let mut adoption = Adoption::new(&point(None, 0));
        let key = TaskKey::new(0, 0);
        assert!(adoption.hold(key, held("tm-a"), 0));
        assert!(adoption.hold(key, held("tm-a"), 0), "the same one again");
        assert!(!adoption.hold(key, held("tm-b"), 0));
        let graph = graph();
        hold_all(&mut adoption, &graph, &["tm-a", "tm-a"]);
        assert_eq!(
            adoption.slots(&graph),
            None,
            "never adopted after a conflict"
        );
    }

    #[test]
    fn a_taskmanager_gone_takes_its_tasks_with_it() {
        let graph = graph();
        let mut adoption = Adoption::new(&point(None, 0));
        hold_all(&mut adoption, &graph, &["tm-a", "tm-b"]);
        adoption.forget_taskmanager("tm-b");
        assert_eq!(
            adoption.taskmanagers(),
            BTreeSet::from(["tm-a".to_string()])
        );
        assert_eq!(adoption.slots(&graph), None);
        hold_all(&mut adoption, &graph, &["tm-a", "tm-c"]);
        assert!(adoption.slots(&graph).is_some(), "shown again by a new one");
    }

    #[test]
    fn checkpoints_after_adoption_follow_every_id_triggered_at_a_held_task() {
        let mut adoption = Adoption::new(&point(Some(7), 8));
        adoption.hold(TaskKey::new(0, 0), held("tm-a"), 10);
        adoption.hold(TaskKey::new(0, 1), held("tm-b"), 9);
        assert_eq!(adoption.next_checkpoint(), 11);
    }
}
