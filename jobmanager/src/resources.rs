//! The resource manager: the registered TaskManagers, when each was last heard from, and
//! their slots. With slot sharing (as in Flink) slot `k` of a job runs subtask `k` of every
//! vertex, so a job of parallelism `p` needs `p` slots; they are taken from the
//! TaskManagers in turn, spreading the job over all of them.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::gateway::TaskExecutorGateway;

/// A registered TaskManager.
pub struct RegisteredTaskManager {
    /// Where its data exchange is reached.
    pub address: String,
    /// Where its HTTP port (`/metrics`) listens (empty: none).
    pub http_address: String,
    /// When it registered, in milliseconds since the epoch.
    pub registered_at_ms: i64,
    /// Slots it offers.
    pub slots: usize,
    /// Slots in use.
    pub used: usize,
    /// Its last registration or heartbeat.
    pub last_seen: Instant,
    /// How to reach it.
    pub gateway: Arc<dyn TaskExecutorGateway>,
}

/// Too few free slots for a job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotShortage {
    /// Slots the job needs.
    pub needed: usize,
    /// Slots free.
    pub free: usize,
    /// Slots offered in all.
    pub total: usize,
    /// TaskManagers registered.
    pub taskmanagers: usize,
}

impl fmt::Display for SlotShortage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "waiting for slots: needs {}, {} of {} free on {} TaskManagers",
            self.needed, self.free, self.total, self.taskmanagers
        )
    }
}

/// The TaskManagers registered with the JobManager.
#[derive(Default)]
pub struct ResourceManager {
    taskmanagers: BTreeMap<String, RegisteredTaskManager>,
}

impl ResourceManager {
    /// Registers TaskManager `id` with all its slots free; true if it was registered
    /// already (it restarted, and lost what it ran).
    pub fn register(
        &mut self,
        id: &str,
        address: String,
        slots: usize,
        gateway: Arc<dyn TaskExecutorGateway>,
    ) -> bool {
        let record = RegisteredTaskManager {
            address,
            http_address: String::new(),
            registered_at_ms: eddy_common::event::wall_clock(),
            slots,
            used: 0,
            last_seen: Instant::now(),
            gateway,
        };
        self.taskmanagers.insert(id.to_string(), record).is_some()
    }

    /// Takes a heartbeat; false for a TaskManager that is not registered.
    pub fn heartbeat(&mut self, id: &str) -> bool {
        match self.taskmanagers.get_mut(id) {
            Some(tm) => {
                tm.last_seen = Instant::now();
                true
            }
            None => false,
        }
    }

    /// Every TaskManager as `GET /v1/taskmanagers` shows it.
    pub fn infos(&self) -> Vec<eddy_proto::v1::TaskManagerInfo> {
        self.taskmanagers
            .iter()
            .map(|(id, tm)| eddy_proto::v1::TaskManagerInfo {
                taskmanager_id: id.clone(),
                address: tm.address.clone(),
                slots: tm.slots as u32,
                free_slots: (tm.slots - tm.used) as u32,
                last_heartbeat_ms_ago: tm.last_seen.elapsed().as_millis() as u64,
                registered_at_ms: tm.registered_at_ms,
                http_address: tm.http_address.clone(),
            })
            .collect()
    }

    /// Says where a TaskManager's HTTP port listens.
    pub fn set_http_address(&mut self, id: &str, http_address: String) {
        if let Some(tm) = self.taskmanagers.get_mut(id) {
            tm.http_address = http_address;
        }
    }

    /// Whether `id` is registered.
    pub fn contains(&self, id: &str) -> bool {
        self.taskmanagers.contains_key(id)
    }

    /// A registered TaskManager.
    pub fn get(&self, id: &str) -> Option<&RegisteredTaskManager> {
        self.taskmanagers.get(id)
    }

    /// Forgets a TaskManager; true if it was registered.
    pub fn remove(&mut self, id: &str) -> bool {
        self.taskmanagers.remove(id).is_some()
    }

    /// TaskManagers not heard from for longer than `timeout`.
    pub fn silent(&self, timeout: Duration) -> Vec<String> {
        self.taskmanagers
            .iter()
            .filter(|(_, tm)| tm.last_seen.elapsed() > timeout)
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// Every TaskManager's id and address.
    pub fn addresses(&self) -> Vec<(String, String)> {
        self.taskmanagers
            .iter()
            .map(|(id, tm)| (id.clone(), tm.address.clone()))
            .collect()
    }

    /// Takes `needed` free slots, spread over the TaskManagers: for slot `k`, the
    /// TaskManager providing it. Takes none if there are too few.
    pub fn allocate(&mut self, needed: usize) -> Result<Vec<String>, SlotShortage> {
        let ids: Vec<&String> = self.taskmanagers.keys().collect();
        let mut free: Vec<usize> = self
            .taskmanagers
            .values()
            .map(|t| t.slots - t.used)
            .collect();
        let Some(slots) = spread_slots(&mut free, needed) else {
            return Err(SlotShortage {
                needed,
                free: free.iter().sum(),
                total: self.taskmanagers.values().map(|t| t.slots).sum(),
                taskmanagers: self.taskmanagers.len(),
            });
        };
        let slots: Vec<String> = slots.into_iter().map(|i| ids[i].clone()).collect();
        for id in &slots {
            if let Some(tm) = self.taskmanagers.get_mut(id) {
                tm.used += 1;
            }
        }
        Ok(slots)
    }

    /// Takes the slots a run already sits in (one on each TaskManager of `slots`, as
    /// [`Self::allocate`] gives them), if they are all free; takes none otherwise.
    pub fn claim(&mut self, slots: &[String]) -> bool {
        let mut wanted: BTreeMap<&str, usize> = BTreeMap::new();
        for id in slots {
            *wanted.entry(id).or_default() += 1;
        }
        let free = wanted.iter().all(|(id, n)| {
            self.taskmanagers
                .get(*id)
                .is_some_and(|tm| tm.slots - tm.used >= *n)
        });
        if free {
            for (id, n) in wanted {
                if let Some(tm) = self.taskmanagers.get_mut(id) {
                    tm.used += n;
                }
            }
        }
        free
    }

    /// Gives back one slot on each TaskManager in `slots` (as [`Self::allocate`] took them).
    pub fn release<'a>(&mut self, slots: impl IntoIterator<Item = &'a String>) {
        for id in slots {
            if let Some(tm) = self.taskmanagers.get_mut(id) {
                tm.used = tm.used.saturating_sub(1);
            }
        }
    }
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
    use async_trait::async_trait;
    use eddy_common::checkpoint::CompletedCheckpoint;
    use eddy_common::error::CallError;
    use eddy_common::event::{Barrier, StopRequest};
    use eddy_common::ids::ExecutionId;

    use crate::gateway::Deployment;

    /// A TaskManager nobody calls: these tests only count slots.
    struct Idle;

    #[async_trait]
    impl TaskExecutorGateway for Idle {
        async fn deploy(&self, _: Deployment) -> Result<(), CallError> {
            unreachable!("slot accounting deploys nothing")
        }
        async fn stop(&self, _: &ExecutionId, _: StopRequest) -> Result<(), CallError> {
            unreachable!("slot accounting stops nothing")
        }
        async fn trigger_checkpoint(&self, _: &ExecutionId, _: Barrier) -> Result<(), CallError> {
            unreachable!("slot accounting triggers nothing")
        }
        async fn notify_checkpoint_complete(
            &self,
            _: &ExecutionId,
            _: CompletedCheckpoint,
        ) -> Result<(), CallError> {
            unreachable!("slot accounting notifies nothing")
        }
    }

    #[test]
    fn slots_are_spread_over_taskmanagers() {
        let mut free = vec![2, 2];
        assert_eq!(spread_slots(&mut free, 3), Some(vec![0, 1, 0]));
        assert_eq!(free, vec![0, 1]);
        assert_eq!(spread_slots(&mut free, 2), None);
        assert_eq!(free, vec![0, 1]);
    }

    #[test]
    fn slots_taken_are_given_back_and_a_shortage_says_what_is_free() {
        let mut resources = ResourceManager::default();
        assert!(!resources.register("a", "in-process".into(), 2, Arc::new(Idle)));
        assert!(!resources.register("b", "in-process".into(), 1, Arc::new(Idle)));
        let first = resources.allocate(2).unwrap();
        assert_eq!(first, vec!["a".to_string(), "b".to_string()]);
        let shortage = resources.allocate(2).unwrap_err();
        assert_eq!(
            shortage.to_string(),
            "waiting for slots: needs 2, 1 of 3 free on 2 TaskManagers"
        );
        resources.release(&first);
        assert_eq!(resources.allocate(3).unwrap().len(), 3);
        // Registering again frees its slots: what it ran is lost.
        assert!(resources.register("a", "in-process".into(), 2, Arc::new(Idle)));
        assert_eq!(resources.allocate(2).unwrap(), vec!["a", "a"]);
    }

    #[test]
    fn an_adopted_run_claims_the_slots_it_sits_in_or_none() {
        let mut resources = ResourceManager::default();
        resources.register("a", "in-process".into(), 2, Arc::new(Idle));
        resources.register("b", "in-process".into(), 1, Arc::new(Idle));
        let run = ["a".to_string(), "b".to_string()];
        assert!(resources.claim(&run));
        // Slot "b" is taken now: a second run there claims nothing, not even "a".
        assert!(!resources.claim(&run));
        assert!(!resources.claim(&["c".to_string()]), "unknown TaskManager");
        assert_eq!(resources.allocate(1).unwrap(), vec!["a"]);
    }

    #[test]
    fn heartbeats_of_unknown_taskmanagers_are_refused_and_silence_is_found() {
        let mut resources = ResourceManager::default();
        assert!(!resources.heartbeat("a"));
        resources.register("a", "in-process".into(), 1, Arc::new(Idle));
        assert!(resources.heartbeat("a"));
        assert!(resources.silent(Duration::from_secs(60)).is_empty());
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(resources.silent(Duration::from_millis(1)), vec!["a"]);
    }
}
