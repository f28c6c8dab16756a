//! Reading and writing checkpoints through `object_store`.
//!
//! A task snapshot that holds changes since an earlier checkpoint lists the files it
//! extends (its chain: a full snapshot, then snapshots of changes, oldest first). Those
//! files stay in their own checkpoint's directory, shared by every later checkpoint that
//! extends them: retention deletes a file only when no retained checkpoint refers to it,
//! and a savepoint copies the files it refers to.

use std::collections::HashSet;
use std::sync::Arc;

use bytes::Bytes;
use futures::TryStreamExt;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};
use serde::{Deserialize, Serialize};
use tokio::sync::Mutex;

use crate::object_storage::StorageLocation;
use crate::register::{Register, fenced_by};
use crate::state::crc32;
use crate::{EddyError, Result};

const METADATA: &str = "_metadata";

/// A task snapshot of an earlier checkpoint that a later one extends.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateFile {
    /// The checkpoint it was written for.
    pub checkpoint: u64,
    /// Path relative to that checkpoint's directory.
    pub file: String,
    /// Size in bytes.
    pub size: u64,
    /// CRC-32 of the contents.
    pub crc32: u32,
}

impl StateFile {
    /// Where it is under the directory that holds the `chk-{n}` directories.
    pub(super) fn path(&self, root: &Path) -> Path {
        let directory = root.clone().join(directory_name(self.checkpoint).as_str());
        join_relative(directory, &self.file)
    }
}

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
    /// The earlier snapshots this one extends, oldest first (empty: it holds all the
    /// task's state).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub previous: Vec<StateFile>,
    /// Files its operators' states refer to by name (the runs of LSM stores), stored with
    /// this checkpoint or an earlier one, under `shared/` there.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shared: Vec<StateFile>,
}

impl StateHandle {
    /// The files a restore of this snapshot (of checkpoint `checkpoint`) reads, oldest
    /// first: what a later snapshot extending it lists as its `previous`.
    pub fn chain(&self, checkpoint: u64) -> Vec<StateFile> {
        let mut chain = self.previous.clone();
        chain.push(StateFile {
            checkpoint,
            file: self.file.clone(),
            size: self.size,
            crc32: self.crc32,
        });
        chain
    }

    /// Bytes written for checkpoint `checkpoint`: the task snapshot and the shared files
    /// stored with it (not those an earlier checkpoint stored).
    pub fn written_size(&self, checkpoint: u64) -> u64 {
        let shared = self.shared.iter().filter(|f| f.checkpoint == checkpoint);
        self.size + shared.map(|f| f.size).sum::<u64>()
    }

    /// Bytes a restore reads: the task snapshot, the earlier ones it extends and the files
    /// it refers to.
    pub fn full_size(&self) -> u64 {
        let earlier = self.previous.iter().chain(&self.shared);
        self.size + earlier.map(|p| p.size).sum::<u64>()
    }
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
    /// Bytes written for this checkpoint: its task snapshots and the shared files stored
    /// with it (not those earlier checkpoints stored).
    pub fn size(&self) -> u64 {
        let checkpoint = self.checkpoint;
        self.tasks.iter().map(|t| t.written_size(checkpoint)).sum()
    }

    /// Bytes a restore reads: the task snapshots, the earlier ones they extend and the
    /// files they refer to.
    pub fn full_size(&self) -> u64 {
        self.tasks.iter().map(StateHandle::full_size).sum()
    }
}

#[cfg(test)]
impl CheckpointMetadata {
    /// Checkpoint `checkpoint` of a job of one task, `task`.
    pub(crate) fn of_one_task(checkpoint: u64, task: StateHandle) -> Self {
        CheckpointMetadata {
            checkpoint,
            completed_at_ms: 0,
            vertex_parallelism: vec![1],
            tasks: vec![task],
            end_of_input: false,
        }
    }
}

/// One checkpoint's or savepoint's directory: `_metadata` and the task snapshots.
#[derive(Debug, Clone)]
pub struct CheckpointDir {
    pub(super) location: StorageLocation,
    /// Where the `chk-{n}` directories of the files its snapshots extend are.
    pub(super) chain_root: Path,
}

impl CheckpointDir {
    /// The directory at `location`: a savepoint (which holds copies of the earlier files
    /// its snapshots extend) or a retained checkpoint's `chk-{n}` directory (whose earlier
    /// files are in its sibling directories).
    pub fn new(location: StorageLocation) -> Self {
        let chain_root = match location.path.filename() {
            Some(name) if name.starts_with("chk-") => {
                let parts: Vec<_> = location.path.parts().collect();
                Path::from_iter(parts[..parts.len() - 1].iter().cloned())
            }
            _ => location.path.clone(),
        };
        CheckpointDir {
            location,
            chain_root,
        }
    }

    /// The metadata, verified: every task snapshot, and every earlier one it extends,
    /// exists with the size and checksum the metadata records.
    pub async fn verified(&self) -> Result<CheckpointMetadata> {
        let metadata = self.metadata().await?;
        self.verify(&metadata).await?;
        Ok(metadata)
    }

    /// Checks that every task snapshot `metadata` lists, and every earlier one it
    /// extends, exists with the size and checksum recorded.
    async fn verify(&self, metadata: &CheckpointMetadata) -> Result<()> {
        for task in &metadata.tasks {
            self.read_chain(task).await?;
            self.check_shared(task).await?;
        }
        Ok(())
    }

    /// The metadata as written, unchecked against the files (each read checks its file).
    pub async fn metadata(&self) -> Result<CheckpointMetadata> {
        let path = self.location.path.clone().join(METADATA);
        let bytes = self.location.store.get(&path).await?.bytes().await?;
        let metadata: CheckpointMetadata = serde_json::from_slice(&bytes).map_err(|e| {
            EddyError::Snapshot(format!(
                "{}: unreadable metadata: {e}",
                self.location.display
            ))
        })?;
        Ok(metadata)
    }

    /// Reads and checks one task snapshot and the earlier ones it extends: the chain,
    /// oldest first, ending with the task's own snapshot.
    pub async fn read_chain(&self, handle: &StateHandle) -> Result<Vec<Bytes>> {
        let own = self.location.path.clone().join(handle.file.as_str());
        let files = handle
            .previous
            .iter()
            .map(|earlier| (earlier.path(&self.chain_root), earlier.size, earlier.crc32))
            .chain([(own, handle.size, handle.crc32)]);
        // Read at once: from S3 each read is a request's round trip.
        futures::future::try_join_all(
            files.map(|(path, size, crc)| async move { self.read_checked(&path, size, crc).await }),
        )
        .await
    }

    async fn read_checked(&self, path: &Path, size: u64, crc: u32) -> Result<Bytes> {
        let bytes = self.location.store.get(path).await?.bytes().await?;
        if bytes.len() as u64 != size || crc32(&bytes) != crc {
            return Err(EddyError::Snapshot(format!(
                "{} is {} bytes with CRC {:08x}, expected {size} bytes with CRC {crc:08x}",
                self.location.show(path),
                bytes.len(),
                crc32(&bytes),
            )));
        }
        Ok(bytes)
    }
}

/// What a restart does when the newest complete checkpoint cannot be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unreadable {
    /// Restore the newest older one that reads back whole (nothing was committed at
    /// checkpoints that a replay could write twice).
    FallBack,
    /// Fail with [`EddyError::UnrestorableCheckpoint`]: the job's sinks commit at
    /// checkpoints, so an older restore would write again what they committed.
    Fail,
}

/// Where a restart resumes.
#[derive(Debug, Clone)]
pub struct RestartPoint {
    /// The checkpoint to restore, if any.
    pub checkpoint: Option<CheckpointMetadata>,
    /// The newest checkpoint id in use, complete or not (0: none): the restarted job
    /// numbers its checkpoints after it, so that no id is taken twice.
    pub newest_id: u64,
}

/// One entry of a job's commit log: the committing JobManager's term and the checkpoint.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Commit {
    term: u64,
    /// `None` in the entry with which a JobManager claims the log before any commit.
    metadata: Option<CheckpointMetadata>,
}

/// A job's commit log: a [`Register`] under `{job}/_commits/` whose versions are the
/// committed checkpoints. Committing a checkpoint is writing the log's next version,
/// which only the JobManager that wrote (or read) the version before it can do: a
/// JobManager taking the job over writes a version first (claims the log), so one that
/// lost the job can no longer commit (high availability's fencing).
#[derive(Debug)]
struct CommitLog {
    register: Register,
    /// The term of this JobManager (0 without high availability).
    term: u64,
    /// The version this JobManager wrote last; `None` until it claimed the log.
    claimed: Option<u64>,
    /// The newest committed checkpoint, as the log held it when claimed or as committed
    /// since.
    committed: Option<CheckpointMetadata>,
}

/// Tries at claiming a commit log that other writers keep changing.
const CLAIM_ATTEMPTS: usize = 10;

impl CommitLog {
    /// The log of the job whose checkpoints are at `location`, for a JobManager of `term`.
    fn new(location: &StorageLocation, term: u64) -> Self {
        CommitLog {
            register: Register::new(
                location.store.clone(),
                location.path.clone().join("_commits"),
            ),
            term,
            claimed: None,
            committed: None,
        }
    }

    fn encode(&self, metadata: Option<CheckpointMetadata>) -> Bytes {
        let commit = Commit {
            term: self.term,
            metadata,
        };
        Bytes::from(serde_json::to_vec(&commit).expect("a commit serializes"))
    }

    /// Claims the log for this JobManager's term (writes its next version), learning the
    /// newest committed checkpoint; fails with [`EddyError::Fenced`] when a later term
    /// holds it (unless this one's term is 0: no high availability).
    async fn claim(&mut self) -> Result<()> {
        for _ in 0..CLAIM_ATTEMPTS {
            let (version, committed) = match self.register.read().await? {
                None => (0, None),
                Some(found) => {
                    let commit: Commit = serde_json::from_slice(&found.value).map_err(|e| {
                        EddyError::Snapshot(format!(
                            "the commit log's version {} is unreadable: {e}",
                            found.version
                        ))
                    })?;
                    if fenced_by(self.term, commit.term) {
                        return Err(EddyError::Fenced(format!(
                            "a jobmanager of term {} commits this job now (this one's term is {})",
                            commit.term, self.term
                        )));
                    }
                    (found.version, commit.metadata)
                }
            };
            if self
                .register
                .write(version, self.encode(committed.clone()))
                .await?
            {
                self.claimed = Some(version + 1);
                self.committed = committed;
                return Ok(());
            }
        }
        Err(EddyError::Fenced(
            "the commit log kept changing while this jobmanager claimed it".into(),
        ))
    }

    /// Fails with [`EddyError::Fenced`] unless the log still holds what this JobManager
    /// wrote last: another one claimed the job since (a savepoint of a deposed leader is
    /// not written).
    async fn check_held(&mut self) -> Result<()> {
        let Some(version) = self.claimed else {
            return self.claim().await;
        };
        let newest = self.register.read().await?.map_or(0, |found| found.version);
        if newest != version {
            return Err(EddyError::Fenced(format!(
                "the commit log is at version {newest}, written by another jobmanager after this one's version {version}"
            )));
        }
        Ok(())
    }

    /// Commits `metadata` as the log's next version.
    async fn append(&mut self, metadata: &CheckpointMetadata) -> Result<()> {
        let after = match self.claimed {
            Some(version) => version,
            None => {
                self.claim().await?;
                self.claimed.expect("claimed")
            }
        };
        if !self
            .register
            .write(after, self.encode(Some(metadata.clone())))
            .await?
        {
            return Err(EddyError::Fenced(format!(
                "checkpoint {} was not committed: another jobmanager wrote the commit log",
                metadata.checkpoint
            )));
        }
        self.claimed = Some(after + 1);
        self.committed = Some(metadata.clone());
        Ok(())
    }
}

/// The checkpoints of one job.
#[derive(Debug, Clone)]
pub struct CheckpointStorage {
    pub(super) location: StorageLocation,
    /// The commit log; held while a checkpoint is committed, copied to a savepoint, or old
    /// ones are deleted, so that neither a commit nor a savepoint refers to a file
    /// retention is deleting (clones share it).
    commits: Arc<Mutex<CommitLog>>,
}

/// `relative` (parts separated by `/`) under `directory`.
fn join_relative(directory: Path, relative: &str) -> Path {
    relative
        .split('/')
        .filter(|part| !part.is_empty())
        .fold(directory, |path, part| path.join(part))
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
        CheckpointStorage {
            commits: Arc::new(Mutex::new(CommitLog::new(&location, 0))),
            location,
        }
    }

    /// The same storage committing under `term`, the term of a leading JobManager (high
    /// availability); a log claimed by a later term refuses its commits.
    pub fn with_term(self, term: u64) -> Self {
        CheckpointStorage {
            commits: Arc::new(Mutex::new(CommitLog::new(&self.location, term))),
            location: self.location,
        }
    }

    /// Where the job's checkpoints are, for messages.
    pub fn display(&self) -> &str {
        &self.location.display
    }

    pub(super) fn path(&self, checkpoint: u64, file: &str) -> Path {
        let directory = self
            .location
            .path
            .clone()
            .join(directory_name(checkpoint).as_str());
        join_relative(directory, file)
    }

    /// Writes a task's snapshot, given as consecutive pieces, which extends the snapshots
    /// `previous` (if any); returns its handle for the acknowledgement.
    pub async fn write_task(
        &self,
        checkpoint: u64,
        vertex: usize,
        subtask: usize,
        parts: Vec<Bytes>,
        previous: Vec<StateFile>,
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
            previous,
            shared: Vec::new(),
        };
        // Never over another snapshot: one left by a task of an earlier attempt (a
        // cancelled or cut-off TaskManager uploading late) under a checkpoint id that a
        // restarted JobManager took again. Whichever comes second fails, and a failed
        // snapshot only declines its checkpoint.
        let path = self.path(checkpoint, &file);
        let create = PutOptions::from(PutMode::Create);
        match self
            .location
            .store
            .put_opts(&path, PutPayload::from_iter(parts), create)
            .await
        {
            Ok(_) => Ok(handle),
            Err(object_store::Error::AlreadyExists { .. }) => Err(EddyError::Snapshot(format!(
                "the snapshot {path} exists already: another attempt of the job wrote it"
            ))),
            Err(error) => Err(error.into()),
        }
    }

    /// Commits a checkpoint, once the earlier files its task snapshots extend are known to
    /// be there (retention may have deleted one that a task extended while the checkpoint
    /// was being taken): appends its metadata to the commit log (the commit point; it
    /// fails with [`EddyError::Fenced`] when a JobManager of a later term claimed the log),
    /// then writes `_metadata` beside its snapshots for restores from the directory.
    pub async fn commit(&self, metadata: &CheckpointMetadata) -> Result<()> {
        let mut log = self.commits.lock().await;
        // Retention keeps a file while a retained checkpoint extends it, and whatever
        // extends a file extends the whole chain before it: the chain's newest file
        // standing means all of it does.
        let directory = self.directory(metadata.checkpoint);
        let chains = metadata.tasks.iter().filter_map(|task| {
            let newest = task.previous.last()?;
            Some(directory.check_stored(newest, task, "extends"))
        });
        futures::future::try_join_all(chains).await?;
        for task in &metadata.tasks {
            directory.check_shared(task).await?;
        }
        log.append(metadata).await?;
        // Committed, its `_metadata` not written yet (a restart writes it).
        crate::failpoint::crash_if("jobmanager.after-commit-log", metadata.checkpoint);
        let path = self.path(metadata.checkpoint, METADATA);
        if let Err(error) = self
            .location
            .store
            .put(&path, metadata_json(metadata))
            .await
        {
            // Committed all the same: restarts read the commit log.
            tracing::warn!(%error, checkpoint = metadata.checkpoint, "writing a committed checkpoint's _metadata failed");
        }
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
        CheckpointDir {
            location,
            chain_root: self.location.path.clone(),
        }
    }

    /// The metadata of checkpoint `n`, verified: every task snapshot exists with the size
    /// and checksum the metadata records.
    pub async fn verified(&self, checkpoint: u64) -> Result<CheckpointMetadata> {
        self.directory(checkpoint).verified().await
    }

    /// Copies completed checkpoint `n` to `savepoints/savepoint-{n}`, which retention never
    /// deletes, with the earlier files its snapshots extend (under `chk-{m}/` in it);
    /// returns the savepoint's location. Its `_metadata` is written last, never over
    /// another, and only while no later JobManager has claimed the job's commit log.
    pub async fn save_as_savepoint(&self, metadata: &CheckpointMetadata) -> Result<String> {
        // Retention waits: the checkpoint's files must all be there to be copied.
        let mut log = self.commits.lock().await;
        let name = format!("savepoint-{}", metadata.checkpoint);
        let target = self
            .location
            .path
            .clone()
            .join("savepoints")
            .join(name.as_str());
        for task in &metadata.tasks {
            for earlier in task.previous.iter().chain(&task.shared) {
                self.location
                    .store
                    .copy(&earlier.path(&self.location.path), &earlier.path(&target))
                    .await?;
            }
            let from = self.path(metadata.checkpoint, &task.file);
            self.location
                .store
                .copy(&from, &target.clone().join(task.file.as_str()))
                .await?;
        }
        log.check_held().await?;
        let create = PutOptions::from(PutMode::Create);
        let path = target.clone().join(METADATA);
        match self
            .location
            .store
            .put_opts(&path, metadata_json(metadata), create)
            .await
        {
            Ok(_) => Ok(format!("{}/savepoints/{name}", self.location.display)),
            Err(object_store::Error::AlreadyExists { .. }) => Err(EddyError::Snapshot(format!(
                "the savepoint {} exists already",
                self.location.show(&path)
            ))),
            Err(error) => Err(error.into()),
        }
    }

    /// The newest checkpoint that checks out; corrupt or partial ones are skipped with a
    /// warning.
    pub async fn latest(&self) -> Result<Option<CheckpointMetadata>> {
        Ok(self.restart_point(Unreadable::FallBack).await?.checkpoint)
    }

    /// Where a restart resumes, from one listing of the checkpoints: the newest complete
    /// checkpoint that reads back whole, and the newest id in use. Incomplete checkpoints
    /// are skipped; a complete one that cannot be read is skipped or fails the call, as
    /// `unreadable` says.
    ///
    /// The commit log names the newest committed checkpoint (claiming the log first, so a
    /// JobManager that lost the job can no longer commit); the listing serves stores
    /// without a log and the fallback (every `_metadata` is written after its commit).
    pub async fn restart_point(&self, unreadable: Unreadable) -> Result<RestartPoint> {
        let committed = {
            let mut log = self.commits.lock().await;
            // Claimed at every restart: a JobManager that lost the job learns it here,
            // before it restores anything.
            log.claim().await?;
            log.committed.clone()
        };
        let mut ids = self.checkpoint_ids().await?;
        let newest_id = ids
            .last()
            .copied()
            .unwrap_or(0)
            .max(committed.as_ref().map_or(0, |m| m.checkpoint));
        if let Some(metadata) = committed {
            let id = metadata.checkpoint;
            match self.directory(id).verify(&metadata).await {
                Ok(()) => {
                    self.write_missing_metadata(&metadata).await?;
                    return Ok(RestartPoint {
                        checkpoint: Some(metadata),
                        newest_id,
                    });
                }
                Err(error) => {
                    self.unreadable(id, error, unreadable)?;
                    ids.retain(|earlier| *earlier < id);
                }
            }
        }
        for id in ids.into_iter().rev() {
            match self.complete(id).await {
                Ok(Some(metadata)) => {
                    return Ok(RestartPoint {
                        checkpoint: Some(metadata),
                        newest_id,
                    });
                }
                Ok(None) => tracing::debug!(checkpoint = id, "checkpoint incomplete, skipped"),
                Err(error) => self.unreadable(id, error, unreadable)?,
            }
        }
        Ok(RestartPoint {
            checkpoint: None,
            newest_id,
        })
    }

    /// Writes a committed checkpoint's `_metadata` if its commit wrote none (its JobManager
    /// stopped between the commit point and that write): restores read it from the
    /// directory, and retention takes a checkpoint without it for incomplete.
    async fn write_missing_metadata(&self, metadata: &CheckpointMetadata) -> Result<()> {
        let path = self.path(metadata.checkpoint, METADATA);
        let create = PutOptions::from(PutMode::Create);
        match self
            .location
            .store
            .put_opts(&path, metadata_json(metadata), create)
            .await
        {
            Ok(_) => {
                tracing::warn!(
                    checkpoint = metadata.checkpoint,
                    "the committed checkpoint had no _metadata: written from the commit log"
                );
                Ok(())
            }
            Err(object_store::Error::AlreadyExists { .. }) => Ok(()),
            Err(error) => Err(error.into()),
        }
    }

    /// Checkpoint `id` is complete but cannot be read: an error, or a warning before an
    /// earlier one is tried, as `unreadable` says.
    fn unreadable(&self, id: u64, error: EddyError, unreadable: Unreadable) -> Result<()> {
        if unreadable == Unreadable::Fail {
            return Err(EddyError::UnrestorableCheckpoint {
                checkpoint: id,
                source: Box::new(error),
            });
        }
        tracing::warn!(checkpoint = id, %error, storage = %self.location.display, "checkpoint corrupt, falling back to an earlier one");
        Ok(())
    }

    /// Checkpoint `id`, verified, or `None` when it is incomplete (has no metadata).
    async fn complete(&self, id: u64) -> Result<Option<CheckpointMetadata>> {
        let directory = self.directory(id);
        let metadata = match directory.metadata().await {
            Err(EddyError::ObjectStore(object_store::Error::NotFound { .. })) => return Ok(None),
            metadata => metadata?,
        };
        directory.verify(&metadata).await?;
        Ok(Some(metadata))
    }

    /// Deletes checkpoints older than the newest `retained` complete ones (and incomplete
    /// ones older than the newest complete one), all but the files a retained checkpoint
    /// extends.
    pub async fn retain(&self, retained: usize, newest_complete: u64) -> Result<()> {
        let _commits = self.commits.lock().await;
        let ids = self.checkpoint_ids().await?;
        let mut kept = Vec::new();
        let mut doomed = Vec::new();
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
            match is_complete && kept.len() < retained {
                true => kept.push(id),
                false => doomed.push(id),
            }
        }
        if doomed.is_empty() {
            return Ok(());
        }
        let mut referenced = HashSet::new();
        for id in kept {
            for task in self.directory(id).metadata().await?.tasks {
                referenced.extend(
                    task.previous
                        .iter()
                        .chain(&task.shared)
                        .map(|earlier| earlier.path(&self.location.path)),
                );
            }
        }
        for id in doomed {
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
            for file in metadata
                .into_iter()
                .chain(rest.into_iter().filter(|p| !referenced.contains(p)))
            {
                self.location.store.delete(&file).await?;
            }
        }
        Ok(())
    }
}

/// A checkpoint's `_metadata` as written: pretty JSON, for people reading the store.
fn metadata_json(metadata: &CheckpointMetadata) -> PutPayload {
    let json = serde_json::to_vec_pretty(metadata).expect("checkpoint metadata serializes");
    PutPayload::from(json)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::object_storage::resolve;

    async fn newest_id(storage: &CheckpointStorage) -> u64 {
        let point = storage.restart_point(Unreadable::FallBack).await.unwrap();
        point.newest_id
    }

    #[tokio::test]
    async fn a_snapshot_is_never_written_over_and_ids_in_use_are_known() {
        let dir = std::env::temp_dir().join(format!("eddy-chk-once-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let storage = CheckpointStorage::new(&resolve(dir.to_str().unwrap(), &[]).unwrap(), "job");
        assert_eq!(newest_id(&storage).await, 0);
        let first = vec![Bytes::from_static(b"attempt 4")];
        storage
            .write_task(13, 0, 1, first, Vec::new())
            .await
            .unwrap();
        // A late upload of another attempt under the same id fails; the first stays.
        let late = vec![Bytes::from_static(b"attempt 5")];
        let error = storage
            .write_task(13, 0, 1, late, Vec::new())
            .await
            .unwrap_err();
        assert!(error.to_string().contains("another attempt"), "{error}");
        assert_eq!(
            std::fs::read(dir.join("job/chk-13/0-1.state")).unwrap(),
            b"attempt 4"
        );
        // Incomplete as it is, checkpoint 13 is the newest id in use.
        assert_eq!(newest_id(&storage).await, 13);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn a_job_that_commits_at_checkpoints_never_falls_back_past_a_complete_one() {
        let dir = std::env::temp_dir().join(format!("eddy-chk-strict-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let storage = CheckpointStorage::new(&resolve(dir.to_str().unwrap(), &[]).unwrap(), "job");
        for n in 1..=3u64 {
            let task = vec![Bytes::from(vec![n as u8; 10])];
            let handle = storage.write_task(n, 0, 0, task, Vec::new()).await.unwrap();
            if n < 3 {
                let metadata = CheckpointMetadata::of_one_task(n, handle);
                storage.commit(&metadata).await.unwrap();
            }
        }
        // 3 is incomplete and skipped; 2 is the newest complete one.
        assert_eq!(
            storage
                .restart_point(Unreadable::Fail)
                .await
                .unwrap()
                .checkpoint
                .unwrap()
                .checkpoint,
            2
        );
        for damage in ["corrupt", "missing"] {
            let file = dir.join("job/chk-2/0-0.state");
            match damage {
                "corrupt" => std::fs::write(&file, [0u8; 10]).unwrap(),
                _ => std::fs::remove_file(&file).unwrap(),
            }
            assert_eq!(storage.latest().await.unwrap().unwrap().checkpoint, 1);
            let error = storage.restart_point(Unreadable::Fail).await.unwrap_err();
            assert!(
                matches!(
                    error,
                    EddyError::UnrestorableCheckpoint { checkpoint: 2, .. }
                ),
                "{damage}: {error}"
            );
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// One task's checkpoint `n` written and its metadata, ready to commit.
    async fn taken(storage: &CheckpointStorage, n: u64) -> CheckpointMetadata {
        let task = vec![Bytes::from(vec![n as u8; 10])];
        let handle = storage.write_task(n, 0, 0, task, Vec::new()).await.unwrap();
        CheckpointMetadata {
            checkpoint: n,
            completed_at_ms: 0,
            vertex_parallelism: vec![1],
            tasks: vec![handle],
            end_of_input: false,
        }
    }

    #[tokio::test]
    async fn a_jobmanager_of_a_later_term_fences_the_earlier_ones_commits() {
        let dir = std::env::temp_dir().join(format!("eddy-chk-fence-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let root = resolve(dir.to_str().unwrap(), &[]).unwrap();
        let old = CheckpointStorage::new(&root, "job").with_term(1);
        old.commit(&taken(&old, 1).await).await.unwrap();
        // Checkpoint 2 is taken by the old leader, which then pauses; a new leader takes
        // the job over: it restores checkpoint 1, the last committed.
        let pending = taken(&old, 2).await;
        let new = CheckpointStorage::new(&root, "job").with_term(2);
        let point = new.restart_point(Unreadable::Fail).await.unwrap();
        assert_eq!(point.checkpoint.unwrap().checkpoint, 1);
        assert_eq!(point.newest_id, 2);
        // The old leader resumes: its commit is refused, and leaves no _metadata.
        let error = old.commit(&pending).await.unwrap_err();
        assert!(matches!(error, EddyError::Fenced(_)), "{error}");
        assert!(!dir.join("job/chk-2/_metadata").exists());
        new.commit(&taken(&new, 3).await).await.unwrap();
        // A JobManager of the old term starting afresh cannot claim the job either.
        let stale = CheckpointStorage::new(&root, "job").with_term(1);
        let error = stale.restart_point(Unreadable::Fail).await.unwrap_err();
        assert!(matches!(error, EddyError::Fenced(_)), "{error}");
        // A JobManager without high availability (term 0) takes any log over.
        let alone = CheckpointStorage::new(&root, "job");
        let point = alone.restart_point(Unreadable::Fail).await.unwrap();
        assert_eq!(point.checkpoint.unwrap().checkpoint, 3);
        // The new leader restarting (same term) restores what it committed.
        let again = CheckpointStorage::new(&root, "job").with_term(2);
        let point = again.restart_point(Unreadable::Fail).await.unwrap();
        assert_eq!(point.checkpoint.unwrap().checkpoint, 3);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn a_deposed_jobmanager_writes_no_savepoint() {
        let dir = std::env::temp_dir().join(format!("eddy-chk-savepoint-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let root = resolve(dir.to_str().unwrap(), &[]).unwrap();
        let old = CheckpointStorage::new(&root, "job").with_term(1);
        let first = taken(&old, 1).await;
        old.commit(&first).await.unwrap();
        let saved = old.save_as_savepoint(&first).await.unwrap();
        assert!(saved.ends_with("/savepoints/savepoint-1"), "{saved}");
        // Never over a savepoint written before.
        let error = old.save_as_savepoint(&first).await.unwrap_err();
        assert!(error.to_string().contains("exists already"), "{error}");
        let second = taken(&old, 2).await;
        old.commit(&second).await.unwrap();
        // A later term claims the job: the old leader's savepoint of its checkpoint 2 is
        // refused, and nothing names it complete.
        let new = CheckpointStorage::new(&root, "job").with_term(2);
        new.restart_point(Unreadable::Fail).await.unwrap();
        let error = old.save_as_savepoint(&second).await.unwrap_err();
        assert!(matches!(error, EddyError::Fenced(_)), "{error}");
        assert!(!dir.join("job/savepoints/savepoint-2/_metadata").exists());
        new.save_as_savepoint(&second).await.unwrap();
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn each_new_term_restores_what_the_one_before_committed() {
        let dir = std::env::temp_dir().join(format!("eddy-chk-terms-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let root = resolve(dir.to_str().unwrap(), &[]).unwrap();
        let mut next = 1;
        for term in 1..=4u64 {
            let storage = CheckpointStorage::new(&root, "job").with_term(term);
            let point = storage.restart_point(Unreadable::Fail).await.unwrap();
            assert_eq!(
                point.checkpoint.map(|m| m.checkpoint),
                (next > 1).then_some(next - 1)
            );
            for _ in 0..3 {
                storage.commit(&taken(&storage, next).await).await.unwrap();
                storage.retain(1, next).await.unwrap();
                next += 1;
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn commit_verify_fall_back_and_retain() {
        let dir = std::env::temp_dir().join(format!("eddy-chk-test-{}", std::process::id()));
        let root = resolve(dir.to_str().unwrap(), &[]).unwrap();
        let storage = CheckpointStorage::new(&root, "job");
        for n in 1..=4u64 {
            let a = storage
                .write_task(n, 0, 0, vec![Bytes::from(vec![n as u8; 10])], Vec::new())
                .await
                .unwrap();
            let b = storage
                .write_task(n, 1, 0, vec![Bytes::from(vec![7; 3])], Vec::new())
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
            storage
                .directory(2)
                .read_chain(&latest.tasks[0])
                .await
                .unwrap(),
            [Bytes::from(vec![2u8; 10])]
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

    /// The soak's JobManager was SIGKILLed between a checkpoint's commit point and its
    /// `_metadata`: every restart's TaskManagers then failed to read it, forever.
    #[tokio::test]
    async fn a_restart_writes_the_metadata_a_commit_left_unwritten() {
        let dir = std::env::temp_dir().join(format!("eddy-chk-unwritten-{}", std::process::id()));
        let root = resolve(dir.to_str().unwrap(), &[]).unwrap();
        let storage = CheckpointStorage::new(&root, "job");
        let task = storage
            .write_task(1, 0, 0, vec![Bytes::from(vec![1; 4])], Vec::new())
            .await
            .unwrap();
        let metadata = CheckpointMetadata {
            checkpoint: 1,
            completed_at_ms: 0,
            vertex_parallelism: vec![1],
            tasks: vec![task],
            end_of_input: false,
        };
        storage.commit(&metadata).await.unwrap();
        std::fs::remove_file(dir.join("job/chk-1/_metadata")).unwrap();
        let point = storage.restart_point(Unreadable::Fail).await.unwrap();
        assert_eq!(point.checkpoint.unwrap().checkpoint, 1);
        assert_eq!(
            storage.verified(1).await.unwrap(),
            metadata,
            "restores read it"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn chains_survive_retention_and_savepoints() {
        let dir = std::env::temp_dir().join(format!("eddy-chain-test-{}", std::process::id()));
        let root = resolve(dir.to_str().unwrap(), &[]).unwrap();
        let storage = CheckpointStorage::new(&root, "job");
        let metadata = |checkpoint, task: &StateHandle| CheckpointMetadata {
            checkpoint,
            completed_at_ms: 0,
            vertex_parallelism: vec![1],
            tasks: vec![task.clone()],
            end_of_input: false,
        };
        // 1 is full, 2 extends 1, 3 extends 2.
        let mut previous = Vec::new();
        let mut handles = Vec::new();
        for n in 1..=3u64 {
            let handle = storage
                .write_task(n, 0, 0, vec![Bytes::from(vec![n as u8; 4])], previous)
                .await
                .unwrap();
            storage.commit(&metadata(n, &handle)).await.unwrap();
            storage.retain(1, n).await.unwrap();
            previous = handle.chain(n);
            handles.push(handle);
        }
        let expected: Vec<Bytes> = (1..=3u8).map(|n| Bytes::from(vec![n; 4])).collect();
        assert!(!dir.join("job/chk-1/_metadata").exists(), "not retained");
        assert_eq!(storage.latest().await.unwrap().unwrap().checkpoint, 3);
        let chain = storage.directory(3).read_chain(&handles[2]).await.unwrap();
        assert_eq!(chain, expected, "the files 3 extends are kept");
        // Restoring from the retained checkpoint's directory finds its siblings.
        let chk_3 = resolve(dir.join("job/chk-3").to_str().unwrap(), &[]).unwrap();
        let from_path = CheckpointDir::new(chk_3).verified().await.unwrap();
        assert_eq!(from_path.checkpoint, 3);

        // A savepoint copies the chain; it outlives the checkpoints.
        let savepoint = storage
            .save_as_savepoint(&metadata(3, &handles[2]))
            .await
            .unwrap();
        let full = storage
            .write_task(4, 0, 0, vec![Bytes::from(vec![4; 4])], Vec::new())
            .await
            .unwrap();
        storage.commit(&metadata(4, &full)).await.unwrap();
        storage.retain(1, 4).await.unwrap();
        assert!(
            !dir.join("job/chk-1/0-0.state").exists(),
            "no longer extended"
        );
        let savepoint = CheckpointDir::new(resolve(&savepoint, &[]).unwrap());
        let saved = savepoint.verified().await.unwrap();
        assert_eq!(
            savepoint.read_chain(&saved.tasks[0]).await.unwrap(),
            expected
        );

        // A snapshot that extends a deleted file cannot be committed.
        let orphan = storage
            .write_task(5, 0, 0, vec![Bytes::from(vec![5; 4])], previous)
            .await
            .unwrap();
        let error = storage.commit(&metadata(5, &orphan)).await.unwrap_err();
        assert!(error.to_string().contains("chk-3"), "{error}");
        assert_eq!(storage.latest().await.unwrap().unwrap().checkpoint, 4);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
