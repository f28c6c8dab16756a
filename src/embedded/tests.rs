//! The JobManager and real TaskManagers in-process, as `eddy run` wires them, with a job
//! store whose writes the test slows down.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use eddy_common::object_storage::StorageLocation;
use futures::stream::BoxStream;
use object_store::local::LocalFileSystem;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult,
};

use super::*;

/// A local store whose writes of RUNNING job records take `delay`: the slow write of an
/// earlier state.
#[derive(Debug)]
struct SlowRunningRecords {
    inner: LocalFileSystem,
    delay: Duration,
}

impl fmt::Display for SlowRunningRecords {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SlowRunningRecords({})", self.inner)
    }
}

#[async_trait]
impl ObjectStore for SlowRunningRecords {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        let bytes: Vec<u8> = payload.iter().flat_map(|b| b.to_vec()).collect();
        if String::from_utf8_lossy(&bytes).contains("\"RUNNING\"") {
            tokio::time::sleep(self.delay).await;
        }
        self.inner.put_opts(location, bytes.into(), opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        self.inner.get_opts(location, options).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.inner.list(prefix)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(
        &self,
        from: &Path,
        to: &Path,
        options: CopyOptions,
    ) -> object_store::Result<()> {
        self.inner.copy_opts(from, to, options).await
    }
}

/// An unbounded job: it runs until it is cancelled.
const UNBOUNDED: &str =
    "CREATE TABLE t (id BIGINT) WITH ('connector' = 'datagen', 'rows-per-second' = '100');
CREATE TABLE o (id BIGINT) WITH ('connector' = 'blackhole');
INSERT INTO o SELECT id FROM t;";

#[tokio::test]
async fn a_job_cancelled_while_its_running_record_is_written_stays_cancelled() {
    let dir = std::env::temp_dir().join(format!("eddy-order-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let store = SlowRunningRecords {
        inner: LocalFileSystem::new_with_prefix(&dir).unwrap(),
        delay: Duration::from_millis(300),
    };
    let location = StorageLocation {
        store: Arc::new(store),
        path: Path::from("jobs"),
        display: dir.display().to_string(),
        filesystem_root: Some(dir.clone()),
    };
    let jobs = JobStore::new(location);
    let jobmanager = JobManager::new(JobManagerConfig::default(), Some(jobs.clone()));
    let metrics = Arc::new(JobMetrics::default());
    let deployed = Arc::new(DeployClock::default());
    let cluster = Cluster::start(&jobmanager, 1, 1, &metrics, &deployed).await;

    let graph = Arc::new(
        eddy_planner::plan(UNBOUNDED, &[], eddy_planner::PlanningContext::CONNECTING).unwrap(),
    );
    let job = jobmanager
        .submit_planned(UNBOUNDED.into(), HashMap::new(), graph, None, "local")
        .unwrap();
    let mut state = jobmanager.watch(&job).unwrap();
    state.wait_for(|s| *s == JobState::Running).await.unwrap();
    // Cancelled while the record of its run is still being written.
    jobmanager.cancel(&job).unwrap();
    tokio::time::sleep(Duration::from_millis(800)).await;

    let stored = jobs.load_all().await.unwrap();
    assert_eq!(stored.len(), 1);
    assert_eq!(
        stored[0].state,
        JobState::Cancelled,
        "a restarted JobManager would resume a job its user cancelled"
    );
    // Nor did the cancelled run start: no task of it runs.
    assert!(cluster.taskmanagers[0].counters().is_empty());
    cluster.shut_down().await;
    let _ = std::fs::remove_dir_all(&dir);
}
