//! The job store (DESIGN §6): `{root}/{job}/job.json` holds what a restarted JobManager
//! needs to resume a job: its SQL and options, its state, and its attempt number.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use eddy_common::Result;
use eddy_common::object_storage::StorageLocation;
use futures::TryStreamExt;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use serde::{Deserialize, Serialize};

use crate::lifecycle::JobState;

const JOB_FILE: &str = "job.json";

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
    /// The revision of each job's record last written; held while writing, so that the
    /// writes of the records are ordered.
    written: Arc<tokio::sync::Mutex<HashMap<String, u64>>>,
}

impl JobStore {
    /// A store under `root`.
    pub fn new(location: StorageLocation) -> Self {
        JobStore {
            location,
            written: Arc::default(),
        }
    }

    fn path(&self, job_id: &str) -> Path {
        self.location.path.clone().join(job_id).join(JOB_FILE)
    }

    /// Writes a job's record, unless a newer revision of it was written already (a
    /// CANCELLED record written before a delayed RUNNING one stays).
    pub async fn save(&self, job: &StoredJob) -> Result<()> {
        let mut written = self.written.lock().await;
        if written
            .get(&job.job_id)
            .is_some_and(|last| *last >= job.revision)
        {
            tracing::debug!(job = %job.job_id, revision = job.revision, "an older job record is not written");
            return Ok(());
        }
        let json = serde_json::to_vec_pretty(job).expect("a job record serializes");
        self.location
            .store
            .put(&self.path(&job.job_id), PutPayload::from(Bytes::from(json)))
            .await?;
        written.insert(job.job_id.clone(), job.revision);
        Ok(())
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
            let path = prefix.clone().join(JOB_FILE);
            let bytes = match self.location.store.get(&path).await {
                Ok(result) => result.bytes().await?,
                Err(object_store::Error::NotFound { .. }) => continue,
                Err(e) => return Err(e.into()),
            };
            match serde_json::from_slice::<StoredJob>(&bytes) {
                Ok(job) => jobs.push(job),
                Err(error) => tracing::warn!(%path, %error, "unreadable job record skipped"),
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
            revision: 0,
        };
        store.save(&job).await.unwrap();
        std::fs::create_dir_all(dir.join("j2")).unwrap();
        std::fs::write(dir.join("j2/job.json"), "{ not json").unwrap();
        assert_eq!(store.load_all().await.unwrap(), vec![job]);
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
