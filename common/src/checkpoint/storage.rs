//! Reading and writing checkpoints through `object_store`.

use bytes::Bytes;
use futures::TryStreamExt;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use serde::{Deserialize, Serialize};

use crate::state::crc32;
use crate::storage::StorageLocation;
use crate::{EddyError, Result};

const METADATA: &str = "_metadata";

/// Where one task snapshot is, and how to check it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateHandle {
    /// The vertex.
    pub vertex: usize,
    /// The subtask.
    pub subtask: usize,
    /// Path relative to the checkpoint's directory.
    pub file: String,
    /// Size in bytes.
    pub size: u64,
    /// CRC-32 of the contents.
    pub crc32: u32,
}

/// The commit record of a checkpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckpointMetadata {
    /// The checkpoint's id.
    pub checkpoint: u64,
    /// When it completed, in milliseconds since the epoch.
    pub completed_at_ms: i64,
    /// Parallelism of each vertex when it was taken.
    pub vertex_parallelism: Vec<usize>,
    /// Every task snapshot.
    pub tasks: Vec<StateHandle>,
    /// Every source had read all its input when it was taken.
    #[serde(default)]
    pub end_of_input: bool,
}

impl CheckpointMetadata {
    /// Total bytes of the task snapshots.
    pub fn size(&self) -> u64 {
        self.tasks.iter().map(|t| t.size).sum()
    }
}

/// One checkpoint's or savepoint's directory: `_metadata` and the task snapshots.
#[derive(Debug, Clone)]
pub struct CheckpointDir {
    location: StorageLocation,
}

impl CheckpointDir {
    /// The directory at `location` (e.g. a savepoint's path).
    pub fn new(location: StorageLocation) -> Self {
        CheckpointDir { location }
    }

    /// The metadata, verified: every task snapshot exists with the size and checksum the
    /// metadata records.
    pub async fn verified(&self) -> Result<CheckpointMetadata> {
        let metadata = self.metadata().await?;
        for task in &metadata.tasks {
            self.read_task(task).await?;
        }
        Ok(metadata)
    }

    /// The metadata as written, unchecked against the files (each read checks its file).
    pub async fn metadata(&self) -> Result<CheckpointMetadata> {
        let path = self.location.path.clone().join(METADATA);
        let bytes = self.location.store.get(&path).await?.bytes().await?;
        let metadata: CheckpointMetadata = serde_json::from_slice(&bytes).map_err(|e| {
            EddyError::Runtime(format!(
                "{}: unreadable metadata: {e}",
                self.location.display
            ))
        })?;
        Ok(metadata)
    }

    /// Reads and checks one task snapshot.
    pub async fn read_task(&self, handle: &StateHandle) -> Result<Bytes> {
        let path = self.location.path.clone().join(handle.file.as_str());
        let bytes = self.location.store.get(&path).await?.bytes().await?;
        if bytes.len() as u64 != handle.size || crc32(&bytes) != handle.crc32 {
            return Err(EddyError::Runtime(format!(
                "{}: {} is {} bytes with CRC {:08x}, expected {} bytes with CRC {:08x}",
                self.location.display,
                handle.file,
                bytes.len(),
                crc32(&bytes),
                handle.size,
                handle.crc32
            )));
        }
        Ok(bytes)
    }
}

/// The checkpoints of one job.
#[derive(Debug, Clone)]
pub struct CheckpointStorage {
    location: StorageLocation,
}

fn directory_name(checkpoint: u64) -> String {
    format!("chk-{checkpoint}")
}

impl CheckpointStorage {
    /// The checkpoints of `job` under `root`.
    pub fn new(root: &StorageLocation, job: &str) -> Self {
        let mut location = root.clone();
        location.path = root.path.clone().join(job);
        location.display = format!("{}/{job}", root.display.trim_end_matches('/'));
        CheckpointStorage { location }
    }

    /// Where the job's checkpoints are, for messages.
    pub fn display(&self) -> &str {
        &self.location.display
    }

    fn path(&self, checkpoint: u64, file: &str) -> Path {
        self.location
            .path
            .clone()
            .join(directory_name(checkpoint).as_str())
            .join(file)
    }

    /// Writes a task's snapshot, given as consecutive pieces; returns its handle for the
    /// acknowledgement.
    pub async fn write_task(
        &self,
        checkpoint: u64,
        vertex: usize,
        subtask: usize,
        parts: Vec<Bytes>,
    ) -> Result<StateHandle> {
        let file = format!("{vertex}-{subtask}.state");
        let mut checksum = crc32fast::Hasher::new();
        for part in &parts {
            checksum.update(part);
        }
        let handle = StateHandle {
            vertex,
            subtask,
            file: file.clone(),
            size: parts.iter().map(|p| p.len() as u64).sum(),
            crc32: checksum.finalize(),
        };
        self.location
            .store
            .put(&self.path(checkpoint, &file), PutPayload::from_iter(parts))
            .await?;
        Ok(handle)
    }

    /// Commits a checkpoint by writing its metadata.
    pub async fn commit(&self, metadata: &CheckpointMetadata) -> Result<()> {
        let json =
            serde_json::to_vec_pretty(metadata).map_err(|e| EddyError::Runtime(e.to_string()))?;
        self.location
            .store
            .put(
                &self.path(metadata.checkpoint, METADATA),
                PutPayload::from(json),
            )
            .await?;
        Ok(())
    }

    /// Ids of the checkpoint directories present (complete or not), ascending.
    async fn checkpoint_ids(&self) -> Result<Vec<u64>> {
        let listing = self
            .location
            .store
            .list_with_delimiter(Some(&self.location.path))
            .await?;
        let mut ids: Vec<u64> = listing
            .common_prefixes
            .iter()
            .filter_map(|p| p.filename()?.strip_prefix("chk-")?.parse().ok())
            .collect();
        ids.sort_unstable();
        Ok(ids)
    }

    /// Checkpoint `n`'s directory.
    pub fn directory(&self, checkpoint: u64) -> CheckpointDir {
        let mut location = self.location.clone();
        location.path = self
            .location
            .path
            .clone()
            .join(directory_name(checkpoint).as_str());
        location.display = format!("{}/{}", self.location.display, directory_name(checkpoint));
        CheckpointDir { location }
    }

    /// The metadata of checkpoint `n`, verified: every task snapshot exists with the size
    /// and checksum the metadata records.
    pub async fn verified(&self, checkpoint: u64) -> Result<CheckpointMetadata> {
        self.directory(checkpoint).verified().await
    }

    /// Copies completed checkpoint `n` to `savepoints/savepoint-{n}`, which retention never
    /// deletes; returns the savepoint's location.
    pub async fn save_as_savepoint(&self, metadata: &CheckpointMetadata) -> Result<String> {
        let name = format!("savepoint-{}", metadata.checkpoint);
        let target = self
            .location
            .path
            .clone()
            .join("savepoints")
            .join(name.as_str());
        for task in &metadata.tasks {
            let from = self.path(metadata.checkpoint, &task.file);
            self.location
                .store
                .copy(&from, &target.clone().join(task.file.as_str()))
                .await?;
        }
        let json =
            serde_json::to_vec_pretty(metadata).map_err(|e| EddyError::Runtime(e.to_string()))?;
        self.location
            .store
            .put(&target.clone().join(METADATA), PutPayload::from(json))
            .await?;
        Ok(format!("{}/savepoints/{name}", self.location.display))
    }

    /// The newest checkpoint that checks out; corrupt or partial ones are skipped with a
    /// warning.
    pub async fn latest(&self) -> Result<Option<CheckpointMetadata>> {
        for id in self.checkpoint_ids().await?.into_iter().rev() {
            match self.verified(id).await {
                Ok(metadata) => return Ok(Some(metadata)),
                Err(EddyError::ObjectStore(object_store::Error::NotFound { .. })) => {
                    tracing::debug!(checkpoint = id, "checkpoint incomplete, skipped");
                }
                Err(error) => {
                    tracing::warn!(checkpoint = id, %error, storage = %self.location.display, "checkpoint corrupt, falling back to an earlier one");
                }
            }
        }
        Ok(None)
    }

    /// Reads and checks one task snapshot of checkpoint `n`.
    pub async fn read_task(&self, checkpoint: u64, handle: &StateHandle) -> Result<Bytes> {
        self.directory(checkpoint).read_task(handle).await
    }

    /// Deletes checkpoints older than the newest `retained` complete ones (and incomplete
    /// ones older than the newest complete one).
    pub async fn retain(&self, retained: usize, newest_complete: u64) -> Result<()> {
        let ids = self.checkpoint_ids().await?;
        let mut complete = 0;
        for id in ids.into_iter().rev() {
            if id > newest_complete {
                continue;
            }
            let is_complete = self
                .location
                .store
                .head(&self.path(id, METADATA))
                .await
                .is_ok();
            if is_complete && complete < retained {
                complete += 1;
                continue;
            }
            let prefix = self.location.path.clone().join(directory_name(id).as_str());
            let files: Vec<Path> = self
                .location
                .store
                .list(Some(&prefix))
                .map_ok(|m| m.location)
                .try_collect()
                .await?;
            // Metadata first, so a half-deleted checkpoint is never taken for complete.
            let (metadata, rest): (Vec<Path>, Vec<Path>) = files
                .into_iter()
                .partition(|p| p.filename() == Some(METADATA));
            for file in metadata.into_iter().chain(rest) {
                self.location.store.delete(&file).await?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::resolve;

    #[tokio::test]
    async fn commit_verify_fall_back_and_retain() {
        let dir = std::env::temp_dir().join(format!("eddy-chk-test-{}", std::process::id()));
        let root = resolve(dir.to_str().unwrap(), &[]).unwrap();
        let storage = CheckpointStorage::new(&root, "job");
        for n in 1..=4u64 {
            let a = storage
                .write_task(n, 0, 0, vec![Bytes::from(vec![n as u8; 10])])
                .await
                .unwrap();
            let b = storage
                .write_task(n, 1, 0, vec![Bytes::from(vec![7; 3])])
                .await
                .unwrap();
            if n < 4 {
                let metadata = CheckpointMetadata {
                    checkpoint: n,
                    completed_at_ms: 0,
                    vertex_parallelism: vec![1, 1],
                    tasks: vec![a, b],
                    end_of_input: false,
                };
                storage.commit(&metadata).await.unwrap();
            }
        }
        // 4 has no metadata: incomplete. Corrupt 3: the newest valid one is 2.
        assert_eq!(storage.latest().await.unwrap().unwrap().checkpoint, 3);
        std::fs::write(dir.join("job/chk-3/0-0.state"), [0u8; 10]).unwrap();
        let latest = storage.latest().await.unwrap().unwrap();
        assert_eq!(latest.checkpoint, 2);
        assert_eq!(
            storage.read_task(2, &latest.tasks[0]).await.unwrap(),
            Bytes::from(vec![2u8; 10])
        );
        storage.retain(1, 2).await.unwrap();
        assert!(!dir.join("job/chk-1").join("_metadata").exists());
        assert!(dir.join("job/chk-2/_metadata").exists());
        assert!(
            dir.join("job/chk-4/0-0.state").exists(),
            "newer than the committed one: kept"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
