//! Which stored snapshot a task's next snapshot extends. A task's snapshot of changes
//! extends its snapshot of the newest completed checkpoint, taken in this run or restored
//! from. The chain of files a restore reads is kept short and not much larger than the
//! state: past [`MAX_CHAIN`] files, or once the chain holds more than twice the bytes a
//! full snapshot would (changes that overwrite earlier ones), the next snapshot is a full
//! one.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use eddy_common::checkpoint::StateFile;

/// The most files a restore of one task snapshot reads.
pub const MAX_CHAIN: usize = 32;

/// A stored snapshot's chain and the size a full snapshot would have had then.
#[derive(Debug, Clone)]
struct Stored {
    chain: Vec<StateFile>,
    full_estimate: u64,
}

/// The chains of the snapshots one task stored in this run (or restored), by checkpoint.
#[derive(Debug, Clone)]
pub struct SnapshotChains {
    incremental: bool,
    stored: Arc<Mutex<BTreeMap<u64, Stored>>>,
    /// The checkpoint the task restored its own snapshot of (0: none).
    restored: u64,
    /// Where the files its snapshots refer to were stored, by name: stored once, referred
    /// to by later snapshots.
    files: Arc<Mutex<HashMap<String, StateFile>>>,
}

impl SnapshotChains {
    /// Chains for a task; without `incremental` every snapshot is a full one.
    pub fn new(incremental: bool) -> Self {
        SnapshotChains {
            incremental,
            stored: Arc::default(),
            restored: 0,
            files: Arc::default(),
        }
    }

    /// The stored files (a panic elsewhere while they were held leaves them whole: each
    /// change is one map operation).
    fn files_held(&self) -> std::sync::MutexGuard<'_, HashMap<String, StateFile>> {
        self.files
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Where the file `name` was stored, if it was (in this run, or by the snapshot the
    /// task restored exactly).
    pub fn stored_file(&self, name: &str) -> Option<StateFile> {
        self.files_held().get(name).cloned()
    }

    /// The file `name` was stored as `file`.
    pub fn file_stored(&self, name: &str, file: StateFile) {
        self.files_held().insert(name.to_string(), file);
    }

    /// Only the files `names` are referred to from now on (the others were merged away:
    /// no later snapshot refers to them).
    pub fn keep_files<'a>(&self, names: impl IntoIterator<Item = &'a str>) {
        let keep: std::collections::HashSet<&str> = names.into_iter().collect();
        self.files_held()
            .retain(|name, _| keep.contains(name.as_str()));
    }

    /// The task restored exactly its own snapshot, which refers to `files`: its next
    /// snapshots refer to them where they are.
    pub fn restored_files(&self, files: &[StateFile]) {
        for file in files {
            self.file_stored(shared_name(file), file.clone());
        }
    }

    /// The task restored exactly its own snapshot of `checkpoint`, whose files are
    /// `chain`: until a newer checkpoint completes, snapshots can extend it.
    pub fn restored(&mut self, checkpoint: u64, chain: Vec<StateFile>) {
        self.restored = checkpoint;
        // What the restore read stands for the state's size until the operators know.
        let full_estimate = chain.iter().map(|f| f.size).sum();
        self.stored(checkpoint, chain, full_estimate);
    }

    /// The newest completed checkpoint, given the newest the JobManager declared
    /// complete: the one restored from counts until a newer one completes.
    pub fn completed(&self, declared: u64) -> u64 {
        declared.max(self.restored)
    }

    /// The chain a snapshot taken now can extend, given the newest completed checkpoint:
    /// this task's snapshot of it, if stored in this run and its chain may grow. Chains of
    /// older checkpoints are forgotten (nothing will extend them).
    pub fn base(&self, completed: u64) -> Option<Vec<StateFile>> {
        let mut stored = self.stored.lock().expect("chains lock");
        stored.retain(|checkpoint, _| *checkpoint >= completed);
        let base = stored.get(&completed)?;
        let bytes: u64 = base.chain.iter().map(|f| f.size).sum();
        let may_grow = base.chain.len() < MAX_CHAIN && bytes <= 2 * base.full_estimate;
        (self.incremental && may_grow).then(|| base.chain.clone())
    }

    /// Records the chain a restore of the task's stored snapshot of `checkpoint` reads,
    /// and roughly how large a full snapshot would have been.
    pub fn stored(&self, checkpoint: u64, chain: Vec<StateFile>, full_estimate: u64) {
        self.stored.lock().expect("chains lock").insert(
            checkpoint,
            Stored {
                chain,
                full_estimate,
            },
        );
    }
}

/// The name a snapshot's state refers to a shared file by: its file name.
pub fn shared_name(file: &StateFile) -> &str {
    file.file.rsplit('/').next().unwrap_or_default()
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
    fn chains_grow_until_they_outweigh_the_state() {
        let chains = SnapshotChains::new(true);
        assert_eq!(chains.base(0), None, "nothing stored yet");
        chains.stored(1, vec![file(1, 100)], 100);
        assert_eq!(chains.base(0), None, "1 has not completed");
        let base = chains.base(1).unwrap();
        // Growing state: changes that add to it keep the chain as large as the state.
        chains.stored(2, [base, vec![file(2, 60)]].concat(), 160);
        assert_eq!(chains.base(2).unwrap().len(), 2);
        // Changes that overwrite: 300 bytes of chain for 110 bytes of state.
        chains.stored(3, vec![file(1, 100), file(2, 60), file(3, 140)], 110);
        assert_eq!(chains.base(3), None, "the chain outweighs the state");
        assert_eq!(chains.base(2), None, "forgotten once 3 completed");

        let long: Vec<StateFile> = (1..=MAX_CHAIN as u64).map(|c| file(c, 1)).collect();
        chains.stored(20, long, 1000);
        assert_eq!(chains.base(20), None, "too long");
        let off = SnapshotChains::new(false);
        off.stored(1, vec![file(1, 100)], 100);
        assert_eq!(off.base(1), None, "incremental snapshots are off");
    }

    #[test]
    fn a_restored_snapshot_counts_as_completed_until_a_newer_one() {
        let mut chains = SnapshotChains::new(true);
        let restored = vec![file(3, 100), file(4, 30)];
        chains.restored(4, restored.clone());
        assert_eq!(
            chains.completed(0),
            4,
            "nothing declared complete in this run yet"
        );
        assert_eq!(chains.base(chains.completed(0)), Some(restored.clone()));
        chains.stored(6, [restored, vec![file(6, 20)]].concat(), 140);
        assert_eq!(chains.completed(6), 6);
        assert_eq!(chains.base(6).unwrap().len(), 3);
    }
}
