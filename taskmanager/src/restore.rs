//! What a restarted task restores: its vertex's snapshots of the checkpoint (or
//! savepoint) restored from, read once per vertex, with the earlier snapshots they extend,
//! and split among the new subtasks.

use std::collections::HashMap;

use bytes::Bytes;
use eddy_common::checkpoint::{CheckpointDir, CheckpointMetadata, StateFile, TaskSnapshot};
use eddy_common::state::StateKind;
use eddy_common::{EddyError, Result};
use futures::StreamExt;

/// The files a restore fetches at once: each holds up to two 8 MiB parts in memory, and a
/// few keep the disk (or the connection to the object store) busy.
const FILES_FETCHED_AT_ONCE: usize = 4;

/// The state a task restores: its vertex's snapshots from every subtask of the previous
/// run (several when the parallelism changed).
#[derive(Debug, Clone, Default)]
pub struct TaskRestore {
    /// The checkpoint.
    pub checkpoint: u64,
    /// Source positions of the previous subtasks.
    pub source_positions: Vec<Vec<u8>>,
    /// For each operator of the chain, its state in each previous subtask (shared by the
    /// subtasks restoring it).
    pub operators: Vec<Vec<Bytes>>,
    /// Data that was in flight to this subtask at an unaligned checkpoint: encoded chunks
    /// with the input each came from.
    pub in_flight: Vec<(usize, Vec<u8>)>,
    /// The sink states of the previous subtasks this one takes over.
    pub sink: Vec<Vec<u8>>,
    /// The files of the task snapshot restored, oldest first, when they hold exactly
    /// this subtask's state and later snapshots may extend them (the same parallelism,
    /// the job's own checkpoint); empty otherwise.
    pub chain: Vec<StateFile>,
    /// The files the operator states restored refer to (LSM runs), to fetch before the
    /// restore.
    pub shared: Vec<StateFile>,
    /// Where the snapshots are.
    pub directory: Option<CheckpointDir>,
}

impl TaskRestore {
    /// Fetches the files the restored states refer to into `dir`, each under its name.
    pub async fn fetch_shared(&self, dir: &std::path::Path) -> Result<()> {
        let Some(directory) = &self.directory else {
            return Ok(());
        };
        if self.shared.is_empty() {
            return Ok(());
        }
        std::fs::create_dir_all(dir)?;
        // Each fetch owns what it reads, so that the stream of them is `Send` for any
        // lifetime the spawned task asks of it.
        let fetches: Vec<_> = self
            .shared
            .iter()
            .map(|file| {
                let to = dir.join(crate::snapshot_chain::shared_name(file));
                let (directory, file) = (directory.clone(), file.clone());
                async move { directory.download_shared(&file, &to).await }
            })
            .collect();
        let mut fetches = futures::stream::iter(fetches).buffer_unordered(FILES_FETCHED_AT_ONCE);
        while let Some(fetched) = fetches.next().await {
            fetched?;
        }
        Ok(())
    }
}

/// What the subtasks of one vertex restore, read once for all of them.
#[derive(Debug, Clone, Default)]
pub struct VertexRestore {
    /// Everything but the operator states.
    shared: TaskRestore,
    /// For each operator, its states with the previous subtask each is from.
    operators: Vec<Vec<(usize, Bytes)>>,
    in_flight: HashMap<usize, Vec<(usize, Vec<u8>)>>,
    /// Each subtask's files, when later snapshots may extend them.
    chains: HashMap<usize, Vec<StateFile>>,
    /// The shared files each previous subtask's snapshot refers to.
    shared_files: HashMap<usize, Vec<StateFile>>,
    /// Sink states by previous subtask.
    sinks: Vec<(usize, Vec<u8>)>,
    /// The vertex runs at the parallelism it had when the checkpoint was taken.
    same_parallelism: bool,
    parallelism: usize,
}

impl VertexRestore {
    /// Reads `vertex`'s snapshots from a checkpoint (or savepoint) directory, with the
    /// earlier snapshots they extend; each file's size and CRC-32 are checked as it is
    /// read. `parallelism` is the vertex's new one. `own_checkpoint`: the directory is one
    /// of the job's checkpoints, whose files later checkpoints may extend (a savepoint's
    /// are the user's, and lie elsewhere).
    pub async fn load(
        directory: &CheckpointDir,
        metadata: &CheckpointMetadata,
        vertex: usize,
        parallelism: usize,
        own_checkpoint: bool,
    ) -> Result<Self> {
        let same_parallelism = metadata.vertex_parallelism.get(vertex) == Some(&parallelism);
        let mut restore = VertexRestore {
            shared: TaskRestore {
                checkpoint: metadata.checkpoint,
                directory: Some(directory.clone()),
                ..Default::default()
            },
            operators: Vec::new(),
            in_flight: HashMap::new(),
            chains: HashMap::new(),
            shared_files: HashMap::new(),
            sinks: Vec::new(),
            same_parallelism,
            parallelism,
        };
        let shared = &mut restore.shared;
        for handle in metadata.tasks.iter().filter(|t| t.vertex == vertex) {
            let what = format!(
                "checkpoint {} task {}-{}",
                metadata.checkpoint, handle.vertex, handle.subtask
            );
            let chain = directory
                .read_chain(handle)
                .await?
                .iter()
                .map(|bytes| TaskSnapshot::decode(bytes, &what))
                .collect::<Result<Vec<_>>>()?;
            let snapshot = chain
                .last()
                .expect("a chain ends with the task's own snapshot");
            if let Some(position) = &snapshot.source {
                shared.source_positions.push(position.clone());
            }
            if let Some(state) = &snapshot.sink {
                restore.sinks.push((handle.subtask, state.clone()));
            }
            if restore.operators.is_empty() {
                restore.operators = vec![Vec::new(); snapshot.operators.len()];
            }
            if chain
                .iter()
                .any(|s| s.operators.len() != restore.operators.len())
            {
                return Err(EddyError::Snapshot(format!(
                    "{what}: operator count differs between subtasks or snapshots"
                )));
            }
            for (i, states) in restore.operators.iter_mut().enumerate() {
                // From the newest full state on: it and the changes taken after it.
                let newest_full = chain
                    .iter()
                    .rposition(|s| s.operators[i].kind == StateKind::Full)
                    .ok_or_else(|| {
                        EddyError::Snapshot(format!(
                            "{what}: operator {i} has changes but no full state to apply them to"
                        ))
                    })?;
                states.extend(
                    chain[newest_full..]
                        .iter()
                        .map(|s| (handle.subtask, s.operators[i].bytes.clone())),
                );
            }
            restore
                .shared_files
                .insert(handle.subtask, handle.shared.clone());
            if same_parallelism && own_checkpoint {
                restore
                    .chains
                    .insert(handle.subtask, handle.chain(metadata.checkpoint));
            }
            if !snapshot.in_flight.is_empty() {
                if !same_parallelism {
                    return Err(EddyError::Snapshot(format!(
                        "{what} is an unaligned checkpoint with data in flight; it restores only at the \
                         same parallelism (take a savepoint, which is aligned, to rescale)"
                    )));
                }
                restore
                    .in_flight
                    .insert(handle.subtask, snapshot.in_flight.clone());
            }
        }
        Ok(restore)
    }

    /// What subtask `subtask` restores: the vertex's state, its own in-flight data, and
    /// the sink states of the previous subtasks it takes over (`previous % parallelism`).
    pub fn for_subtask(&self, subtask: usize) -> TaskRestore {
        let mut restore = TaskRestore {
            // At an unchanged parallelism only the predecessor's files are read.
            shared: self
                .shared_files
                .iter()
                .filter(|(owner, _)| !self.same_parallelism || **owner == subtask)
                .flat_map(|(_, files)| files.iter().cloned())
                .collect(),
            in_flight: self.in_flight.get(&subtask).cloned().unwrap_or_default(),
            chain: self.chains.get(&subtask).cloned().unwrap_or_default(),
            sink: self
                .sinks
                .iter()
                .filter(|(previous, _)| previous % self.parallelism.max(1) == subtask)
                .map(|(_, state)| state.clone())
                .collect(),
            ..self.shared.clone()
        };
        // At an unchanged parallelism a subtask owns exactly the key groups its predecessor
        // owned: that one's operator state is all it needs to read.
        restore.operators = self
            .operators
            .iter()
            .map(|states| {
                states
                    .iter()
                    .filter(|(owner, _)| !self.same_parallelism || *owner == subtask)
                    .map(|(_, state)| state.clone())
                    .collect()
            })
            .collect();
        restore
    }
}
