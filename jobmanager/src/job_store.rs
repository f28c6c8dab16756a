//! The job store (DESIGN §6): what a restarted JobManager needs to resume a job: its SQL
//! and options, its state, and its attempt number. Each job's record is a register
//! (`{root}/{job}/_record/`) whose versions carry the leader term that wrote them, so a
//! JobManager of an earlier term (paused, cut off) can no longer write once a later one
//! has; `{root}/{job}/job.json` is a copy for people and for stores of before the register.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use eddy_common::object_storage::StorageLocation;
use eddy_common::register::{Register, fenced_by};
use eddy_common::{EddyError, Result};
use futures::TryStreamExt;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use serde::{Deserialize, Serialize};

use crate::lifecycle::JobState;

const JOB_FILE: &str = "job.json";
const RECORD_DIR: &str = "_record";

/// A version of a job's record register.
#[derive(Serialize, Deserialize)]
struct TermedRecord {
    /// The leader term of the JobManager that wrote it.
    term: u64,
    job: StoredJob,
}

/// A job as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredJob {
    /// The job's id.
    pub job_id: String,
    /// Its script.
    pub sql: String,
    /// Options given with the submission.
    pub options: HashMap<String, String>,
    /// Who submitted it.
    #[serde(default)]
    pub owner: String,
    /// Its state (stored as `eddy status` shows it: `RUNNING`, `FINISHED`, ...).
    pub state: JobState,
    /// The last attempt started.
    pub attempt: u32,
    /// Restarts so far.
    pub restarts: u32,
    /// When it was submitted, in milliseconds since the epoch.
    pub submitted_at_ms: i64,
    /// The savepoint it started from.
    #[serde(default)]
    pub restore_path: Option<String>,
    /// The checkpoint its last attempt restored (0: none).
    #[serde(default)]
    pub restore_from: u64,
    /// Orders the writes of one job's record: a record is written only if it is newer than
    /// the last one written (records are made in the order the job's state changed, but
    /// written concurrently). Not stored.
    #[serde(skip)]
    pub revision: u64,
}

/// Jobs kept in object storage.
#[derive(Debug, Clone)]
pub struct JobStore {
    location: StorageLocation,
    /// The leader term records are written in (0 without high availability).
    term: u64,
    /// What was last written of each job's record; held while writing, so that the
    /// writes of the records are ordered.
    written: Arc<tokio::sync::Mutex<HashMap<String, Written>>>,
}

/// The last write of one job's record by this store.
#[derive(Debug, Clone, Copy)]
struct Written {
    /// The record's revision.
    revision: u64,
    /// The register version it became: the next write goes after it without reading the
    /// register first (a version written meanwhile makes that write fail, and the
    /// register is read then).
    version: u64,
}

impl JobStore {
    /// A store under `root`, written in term 0 (without high availability).
    pub fn new(location: StorageLocation) -> Self {
        JobStore {
            location,
            term: 0,
            written: Arc::default(),
        }
    }

    /// The same store, written in leader term `term`.
    pub fn with_term(self, term: u64) -> Self {
        JobStore { term, ..self }
    }

    fn path(&self, job_id: &str) -> Path {
        self.location.path.clone().join(job_id).join(JOB_FILE)
    }

    fn register(&self, job_id: &str) -> Register {
        let dir = self.location.path.clone().join(job_id).join(RECORD_DIR);
        Register::new(self.location.store.clone(), dir)
    }

    /// Writes a job's record, unless a newer revision of it was written already (a
    /// CANCELLED record written before a delayed RUNNING one stays). Fails with
    /// [`EddyError::Fenced`] when a JobManager of a later term wrote it (term 0, without
    /// high availability, writes over any).
    pub async fn save(&self, job: &StoredJob) -> Result<()> {
        let mut written = self.written.lock().await;
        let last = written.get(&job.job_id).copied();
        if last.is_some_and(|last| last.revision >= job.revision) {
            tracing::debug!(job = %job.job_id, revision = job.revision, "an older job record is not written");
            return Ok(());
        }
        let version = self.write_record(job, last.map(|l| l.version)).await?;
        let json = serde_json::to_vec_pretty(job).expect("a job record serializes");
        self.location
            .store
            .put(&self.path(&job.job_id), PutPayload::from(Bytes::from(json)))
            .await?;
        let revision = job.revision;
        written.insert(job.job_id.clone(), Written { revision, version });
        Ok(())
    }

    /// Appends `job` to its record register after version `after` (this store's last
    /// write), or after the newest version when another writer wrote since or this store
    /// wrote nothing yet, unless a later term wrote it; answers the version written.
    async fn write_record(&self, job: &StoredJob, mut after: Option<u64>) -> Result<u64> {
        let register = self.register(&job.job_id);
        let entry = TermedRecord {
            term: self.term,
            job: job.clone(),
        };
        let value = Bytes::from(serde_json::to_vec(&entry).expect("a job record serializes"));
        loop {
            let version = match after.take() {
                Some(version) => version,
                None => self.newest_version(&register, &job.job_id).await?,
            };
            if register.write(version, value.clone()).await? {
                return Ok(version + 1);
            }
        }
    }

    /// The newest version of job `job_id`'s record register (0: none), unless a later term
    /// wrote it.
    async fn newest_version(&self, register: &Register, job_id: &str) -> Result<u64> {
        let Some(newest) = register.read().await? else {
            return Ok(0);
        };
        let written_in =
            serde_json::from_slice::<TermedRecord>(&newest.value).map_or(0, |record| record.term);
        if fenced_by(self.term, written_in) {
            return Err(EddyError::Fenced(format!(
                "job {job_id}'s record was written in term {written_in}, after this jobmanager's term {}",
                self.term
            )));
        }
        Ok(newest.version)
    }

    /// A job's record: the register's newest, else `job.json` (stores of before the
    /// register); `None` when neither is there or readable.
    async fn load(&self, job_dir: &Path) -> Result<Option<StoredJob>> {
        let register = Register::new(
            self.location.store.clone(),
            job_dir.clone().join(RECORD_DIR),
        );
        match register.read().await {
            Ok(Some(newest)) => match serde_json::from_slice::<TermedRecord>(&newest.value) {
                Ok(record) => return Ok(Some(record.job)),
                Err(error) => {
                    tracing::warn!(job = %job_dir, %error, "unreadable job record register; reading job.json")
                }
            },
            Ok(None) => {}
            Err(error) => {
                tracing::warn!(job = %job_dir, %error, "cannot read the job record register; reading job.json")
            }
        }
        let path = job_dir.clone().join(JOB_FILE);
        let bytes = match self.location.store.get(&path).await {
            Ok(result) => result.bytes().await?,
            Err(object_store::Error::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        match serde_json::from_slice::<StoredJob>(&bytes) {
            Ok(job) => Ok(Some(job)),
            Err(error) => {
                tracing::warn!(%path, %error, "unreadable job record skipped");
                Ok(None)
            }
        }
    }

    /// Every stored job; unreadable records are skipped with a warning.
    pub async fn load_all(&self) -> Result<Vec<StoredJob>> {
        let listing = self
            .location
            .store
            .list_with_delimiter(Some(&self.location.path))
            .await?;
        let mut jobs = Vec::new();
        for prefix in listing.common_prefixes {
            if let Some(job) = self.load(&prefix).await? {
                jobs.push(job);
            }
        }
        jobs.sort_by_key(|j| j.submitted_at_ms);
        Ok(jobs)
    }

    /// Whether the store can be listed (for a clear error at start-up).
    pub async fn check(&self) -> Result<()> {
        let _: Vec<_> = self
            .location
            .store
            .list(Some(&self.location.path))
            .try_collect()
            .await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use eddy_common::object_storage::resolve;

    #[tokio::test]
    async fn saves_and_loads_jobs() {
        let dir = std::env::temp_dir().join(format!("eddy-jobstore-{}", std::process::id()));
        let store = JobStore::new(resolve(dir.to_str().unwrap(), &[]).unwrap());
        let job = StoredJob {
            job_id: "j1".into(),
            sql: "INSERT ...".into(),
            options: HashMap::new(),
            owner: "alice".into(),
            state: JobState::Running,
            attempt: 2,
            restarts: 1,
            submitted_at_ms: 5,
            restore_path: None,
            restore_from: 0,
            revision: 0,
        };
        store.save(&job).await.unwrap();
        std::fs::create_dir_all(dir.join("j2")).unwrap();
        std::fs::write(dir.join("j2/job.json"), "{ not json").unwrap();
        assert_eq!(store.load_all().await.unwrap(), vec![job]);
        let _ = std::fs::remove_dir_all(&dir);
    }

    fn record(job_id: &str, state: JobState, revision: u64) -> StoredJob {
        StoredJob {
            job_id: job_id.into(),
            sql: String::new(),
            options: HashMap::new(),
            owner: "alice".into(),
            state,
            attempt: 1,
            restarts: 0,
            submitted_at_ms: 0,
            restore_path: None,
            restore_from: 0,
            revision,
        }
    }

    #[tokio::test]
    async fn a_jobmanager_of_an_earlier_term_cannot_write_a_record_any_more() {
        let dir = std::env::temp_dir().join(format!("eddy-jobstore-terms-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let location = || resolve(dir.to_str().unwrap(), &[]).unwrap();
        let old_leader = JobStore::new(location()).with_term(1);
        let new_leader = JobStore::new(location()).with_term(2);
        old_leader
            .save(&record("j", JobState::Running, 1))
            .await
            .unwrap();
        new_leader
            .save(&record("j", JobState::Cancelled, 1))
            .await
            .unwrap();
        // The paused leader wakes and writes what it was about to.
        let fenced = old_leader.save(&record("j", JobState::Running, 2)).await;
        assert!(
            matches!(&fenced, Err(EddyError::Fenced(reason)) if reason.contains("term 2")),
            "{fenced:?}"
        );
        let loaded = new_leader.load_all().await.unwrap();
        assert_eq!(loaded[0].state, JobState::Cancelled);
        // Without high availability (term 0) a JobManager takes any record over.
        let single = JobStore::new(location());
        single
            .save(&record("j", JobState::Finished, 1))
            .await
            .unwrap();
        assert_eq!(
            single.load_all().await.unwrap()[0].state,
            JobState::Finished
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn a_record_of_a_store_before_the_register_is_read_from_job_json() {
        let dir = std::env::temp_dir().join(format!("eddy-jobstore-legacy-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("old")).unwrap();
        let old = record("old", JobState::Running, 0);
        std::fs::write(dir.join("old/job.json"), serde_json::to_vec(&old).unwrap()).unwrap();
        let store = JobStore::new(resolve(dir.to_str().unwrap(), &[]).unwrap());
        assert_eq!(store.load_all().await.unwrap(), vec![old]);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn a_record_older_than_the_one_written_is_not_written() {
        let dir = std::env::temp_dir().join(format!("eddy-jobstore-order-{}", std::process::id()));
        let store = JobStore::new(resolve(dir.to_str().unwrap(), &[]).unwrap());
        let record = |state: JobState, revision| StoredJob {
            job_id: "j".into(),
            sql: String::new(),
            options: HashMap::new(),
            owner: "alice".into(),
            state,
            attempt: 3,
            restarts: 2,
            submitted_at_ms: 0,
            restore_path: None,
            restore_from: 0,
            revision,
        };
        // The job was cancelled (revision 8) after it ran (revision 7); the write of the
        // RUNNING record comes last.
        store.save(&record(JobState::Cancelled, 8)).await.unwrap();
        store.save(&record(JobState::Running, 7)).await.unwrap();
        let loaded = store.load_all().await.unwrap();
        assert_eq!(loaded[0].state, JobState::Cancelled);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
