//! Which stored snapshot a task's next snapshot extends. A task's snapshot of changes
//! extends its snapshot of the newest completed checkpoint, taken in this run; the chain
//! of files a restore reads is kept short and small: past [`MAX_CHAIN`] files, or once the
//! changes outweigh the full snapshot they start from, the next snapshot is a full one.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use eddy_common::checkpoint::StateFile;

/// The most files a restore of one task snapshot reads.
pub const MAX_CHAIN: usize = 16;

/// The chains of the snapshots one task stored in this run, by checkpoint.
#[derive(Debug, Clone)]
pub struct SnapshotChains {
    incremental: bool,
    stored: Arc<Mutex<BTreeMap<u64, Vec<StateFile>>>>,
}

impl SnapshotChains {
    /// Chains for a task; without `incremental` every snapshot is a full one.
    pub fn new(incremental: bool) -> Self {
        SnapshotChains {
            incremental,
            stored: Arc::default(),
        }
    }

    /// The chain a snapshot taken now can extend, given the newest completed checkpoint:
    /// this task's snapshot of it, if stored in this run and its chain may grow. Chains of
    /// older checkpoints are forgotten (nothing will extend them).
    pub fn base(&self, completed: u64) -> Option<Vec<StateFile>> {
        let mut stored = self.stored.lock().expect("chains lock");
        stored.retain(|checkpoint, _| *checkpoint >= completed);
        let chain = stored.get(&completed)?;
        let full = chain.first()?.size;
        let changes: u64 = chain[1..].iter().map(|f| f.size).sum();
        (self.incremental && chain.len() < MAX_CHAIN && changes <= full).then(|| chain.clone())
    }

    /// Records the chain a restore of the task's stored snapshot of `checkpoint` reads.
    pub fn stored(&self, checkpoint: u64, chain: Vec<StateFile>) {
        self.stored
            .lock()
            .expect("chains lock")
            .insert(checkpoint, chain);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(checkpoint: u64, size: u64) -> StateFile {
        StateFile {
            checkpoint,
            file: "0-0.state".into(),
            size,
            crc32: 0,
        }
    }

    #[test]
    fn chains_grow_until_the_changes_outweigh_the_full_snapshot() {
        let chains = SnapshotChains::new(true);
        assert_eq!(chains.base(0), None, "nothing stored yet");
        chains.stored(1, vec![file(1, 100)]);
        assert_eq!(chains.base(0), None, "1 has not completed");
        let base = chains.base(1).unwrap();
        chains.stored(2, [base, vec![file(2, 60)]].concat());
        chains.stored(3, vec![file(1, 100), file(2, 60), file(3, 50)]);
        assert_eq!(chains.base(2).unwrap().len(), 2);
        assert_eq!(
            chains.base(3),
            None,
            "110 bytes of changes on a 100-byte snapshot"
        );
        assert_eq!(chains.base(2), None, "forgotten once 3 completed");

        let long: Vec<StateFile> = (1..=MAX_CHAIN as u64).map(|c| file(c, 1)).collect();
        chains.stored(20, long);
        assert_eq!(chains.base(20), None, "too long");
        assert_eq!(SnapshotChains::new(false).base(0), None);
        let off = SnapshotChains::new(false);
        off.stored(1, vec![file(1, 100)]);
        assert_eq!(off.base(1), None, "incremental snapshots are off");
    }
}
