//! Places subtasks into slots. With slot sharing (as in Flink) slot `k` runs subtask `k`
//! of every vertex, so a job of parallelism `p` needs `p` slots; slots are taken from the
//! TaskManagers in turn, spreading the job over all of them.

use std::sync::Arc;

use eddy_common::plan::JobGraph;
use eddy_common::{EddyError, Result};
use eddy_taskmanager::TaskManager;

/// Where one subtask runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Assignment {
    /// The vertex.
    pub vertex: usize,
    /// Its subtask.
    pub subtask: usize,
    /// Index of the TaskManager running it.
    pub taskmanager: usize,
}

/// Assigns every subtask of `graph` to a TaskManager.
pub fn place(graph: &JobGraph, taskmanagers: &[Arc<TaskManager>]) -> Result<Vec<Assignment>> {
    let needed = graph.slots_needed();
    let mut free: Vec<usize> = taskmanagers.iter().map(|t| t.slots()).collect();
    let slots = spread_slots(&mut free, needed).ok_or_else(|| {
        EddyError::Runtime(format!(
            "the job needs {needed} slots but the TaskManagers offer {}",
            taskmanagers.iter().map(|t| t.slots()).sum::<usize>()
        ))
    })?;
    let mut placement = Vec::with_capacity(graph.subtask_count());
    for vertex in &graph.vertices {
        for (subtask, taskmanager) in slots.iter().take(vertex.parallelism).enumerate() {
            placement.push(Assignment {
                vertex: vertex.id,
                subtask,
                taskmanager: *taskmanager,
            });
        }
    }
    Ok(placement)
}

/// For slots `0..needed`, the index of the TaskManager providing each, taking one free
/// slot from each TaskManager in turn (and counting it in `free`); `None`, with `free`
/// unchanged, if there are too few.
pub fn spread_slots(free: &mut [usize], needed: usize) -> Option<Vec<usize>> {
    if free.iter().sum::<usize>() < needed {
        return None;
    }
    let mut slots = Vec::with_capacity(needed);
    while slots.len() < needed {
        for (tm, f) in free.iter_mut().enumerate() {
            if *f > 0 && slots.len() < needed {
                *f -= 1;
                slots.push(tm);
            }
        }
    }
    Some(slots)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_spread_over_taskmanagers() {
        let mut free = vec![2, 2];
        assert_eq!(spread_slots(&mut free, 3), Some(vec![0, 1, 0]));
        assert_eq!(free, vec![0, 1]);
        assert_eq!(spread_slots(&mut free, 2), None);
        assert_eq!(free, vec![0, 1]);
    }
}
