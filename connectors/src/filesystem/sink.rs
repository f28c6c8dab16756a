//! The filesystem sink: part files written under hidden in-progress names (`.part-…`,
//! which readers skip) and given their visible names when they are done.
//!
//! Exactly once, a closed part file stays hidden until its checkpoint completes, so a
//! reader listing the directory never sees uncommitted or duplicate rows: the checkpoint
//! records the pending files, the commit renames them (on S3 a server-side copy; renaming
//! a file that was already renamed is success), and a restarted sink deletes the hidden
//! files earlier attempts left behind. At least once (or without checkpoints), a part file
//! becomes visible as soon as it is closed: when it rolls, at each checkpoint and at the end.
//!
//! A partitioned table (`PARTITIONED BY`) is written into one directory per partition
//! ([`partitions`](super::partitions)), a part file open per partition. With a partition
//! commit policy, the partitions each checkpoint makes due ([`commit`](super::commit)) are
//! recorded in its transaction and get their success file when it commits, after their
//! part files are visible: the planner routes each partition to one subtask, so no other
//! subtask's rows of it are still hidden then.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::record_batch::RecordBatch;
use eddy_common::chunk::Chunk;
use eddy_common::event::{StreamEnd, Timestamp, wall_clock};
use eddy_common::metrics::OperatorMetrics;
use eddy_common::object_storage::StorageLocation;
use eddy_common::state::{StateReader, StateWriter};
use eddy_common::{EddyError, Result};
use futures::future::BoxFuture;
use futures::{FutureExt, TryStreamExt};
use object_store::buffered::BufWriter;
use object_store::path::{Path, PathPart};
use object_store::{ObjectStore, ObjectStoreExt};
use tokio::io::AsyncWriteExt;

use super::FileFormat;
use super::avro::AvroPart;
use super::commit::{PartitionCommit, PendingPartitions};
use super::parquet::ParquetPart;
use super::partitions::PartitionColumns;
use crate::format::Format;
use crate::transaction::{
    AttemptToken, DeliveryGuarantee, TransactionCommitter, TransactionWriter, TwoPhaseCommitSink,
};
use crate::{SinkContext, SinkWriter};

const IN_PROGRESS: &str = ".inprogress";

/// How a filesystem table is written.
#[derive(Debug, Clone)]
pub struct FileSinkConfig {
    /// The directory.
    pub location: StorageLocation,
    /// CSV or JSON lines, or Parquet.
    pub format: FileFormat,
    /// A part file is closed once it holds this many bytes.
    pub rolling_file_size: u64,
    /// A part file is closed once it has been open this long.
    pub rollover_interval: Option<Duration>,
    /// `'sink.delivery-guarantee'`; by default exactly once when the job checkpoints.
    pub guarantee: Option<DeliveryGuarantee>,
    /// `PARTITIONED BY`: rows go into partition directories.
    pub partitions: Option<Arc<PartitionColumns>>,
    /// How partitions are committed, if they are.
    pub commit: Option<PartitionCommit>,
}

/// The writer of one sink subtask.
pub fn create(config: &FileSinkConfig, context: &SinkContext) -> Result<Box<dyn SinkWriter>> {
    let guarantee = config.guarantee.unwrap_or(match context.completed {
        Some(_) => DeliveryGuarantee::ExactlyOnce,
        None => DeliveryGuarantee::None,
    });
    let exactly_once = guarantee == DeliveryGuarantee::ExactlyOnce;
    let token = AttemptToken::new(context.execution.attempt);
    let parts = PartWriter {
        config: config.clone(),
        job_prefix: format!("part-{}-", context.execution.job),
        name_prefix: format!("part-{}-{token}-{}", context.execution.job, context.subtask),
        metrics: context.metrics.clone(),
        parts: HashMap::new(),
        parts_written: 0,
        buffer: Vec::new(),
        publish: !exactly_once,
        closed: Vec::new(),
        pending: PendingPartitions::default(),
        watermark: None,
    };
    if !exactly_once {
        return Ok(Box::new(VisibleParts(parts)));
    }
    let committer = FileCommitter {
        location: config.location.clone(),
        hidden_prefix: format!(".{}", parts.job_prefix),
        partitioned: config.partitions.is_some(),
        subtask: context.subtask,
        parallelism: context.parallelism.max(1),
        token,
    };
    Ok(Box::new(TwoPhaseCommitSink::new(
        context,
        Box::new(parts),
        Arc::new(committer),
    )?))
}

/// A part file being written under its hidden name.
struct Part {
    body: PartBody,
    in_progress: Path,
    target: Path,
    opened: Instant,
}

/// What a part file is written with.
enum PartBody {
    /// Lines in `format`, uploaded as they come.
    Lines {
        upload: Box<BufWriter>,
        format: Format,
        bytes: u64,
    },
    /// A Parquet file, a row group at a time.
    Parquet(Box<ParquetPart>),
    /// An Avro container file, a block a batch.
    Avro(Box<AvroPart>),
}

impl PartBody {
    /// Appends rows (a line part encodes them into `buffer` first).
    async fn write(&mut self, rows: &RecordBatch, buffer: &mut Vec<u8>) -> Result<()> {
        match self {
            PartBody::Lines {
                upload,
                format,
                bytes,
            } => {
                buffer.clear();
                format.encode(rows, buffer)?;
                upload.write_all(buffer).await?;
                *bytes += buffer.len() as u64;
                Ok(())
            }
            PartBody::Parquet(parquet) => parquet.write(rows).await,
            PartBody::Avro(avro) => avro.write(rows).await,
        }
    }

    /// The file's size so far.
    fn bytes(&self) -> u64 {
        match self {
            PartBody::Lines { bytes, .. } => *bytes,
            PartBody::Parquet(parquet) => parquet.bytes(),
            PartBody::Avro(avro) => avro.bytes(),
        }
    }

    /// Completes the file.
    async fn close(self) -> Result<()> {
        match self {
            PartBody::Lines { mut upload, .. } => Ok(upload.shutdown().await?),
            PartBody::Parquet(parquet) => (*parquet).close().await.map(|_| ()),
            PartBody::Avro(avro) => (*avro).close().await,
        }
    }

    /// Gives the file up.
    async fn abort(self) -> Result<()> {
        match self {
            PartBody::Lines { mut upload, .. } => Ok(upload.abort().await?),
            PartBody::Parquet(parquet) => (*parquet).abort().await,
            PartBody::Avro(avro) => (*avro).abort().await,
        }
    }
}

/// Writes rows into rolling part files.
struct PartWriter {
    config: FileSinkConfig,
    /// `part-{job}-`: the start of every file name of this job.
    job_prefix: String,
    /// `part-{job}-a{attempt}t{time}-{subtask}`: unique to this writer.
    name_prefix: String,
    metrics: Arc<OperatorMetrics>,
    /// The open part files, by partition directory (`""` when the table has none).
    parts: HashMap<String, Part>,
    parts_written: u64,
    buffer: Vec<u8>,
    /// Whether a closed part is renamed at once (or kept hidden for a commit).
    publish: bool,
    /// Closed parts still hidden, as (hidden, visible) names.
    closed: Vec<(Path, Path)>,
    /// Partitions written whose commit is still to come.
    pending: PendingPartitions,
    /// The input's watermark.
    watermark: Option<Timestamp>,
}

impl PartWriter {
    async fn write_chunk(&mut self, chunk: &Chunk) -> Result<()> {
        if chunk.is_empty() {
            return Ok(());
        }
        match self.config.partitions.clone() {
            None => self.write_rows("", chunk.rows()).await?,
            Some(partitions) => {
                let now = wall_clock();
                for (directory, rows) in partitions.split(chunk.rows())? {
                    self.write_rows(&directory, &rows).await?;
                    if self.config.commit.is_some() {
                        self.pending.written(&directory, now);
                    }
                }
            }
        }
        OperatorMetrics::add(&self.metrics.records_in, chunk.num_rows() as u64);
        Ok(())
    }

    /// Writes rows into the part file of partition `directory`, opening one if none is.
    async fn write_rows(&mut self, directory: &str, rows: &RecordBatch) -> Result<()> {
        if !self.parts.contains_key(directory) {
            let part = self.open_part(directory, rows)?;
            self.parts.insert(directory.to_string(), part);
        }
        let part = self.parts.get_mut(directory).expect("part open");
        part.body.write(rows, &mut self.buffer).await?;
        let too_old = self
            .config
            .rollover_interval
            .is_some_and(|limit| part.opened.elapsed() >= limit);
        if part.body.bytes() >= self.config.rolling_file_size || too_old {
            let part = self.parts.remove(directory).expect("part open");
            self.close_part(part).await?;
        }
        Ok(())
    }

    /// Opens a part file in partition `directory` for rows shaped like `rows`.
    fn open_part(&mut self, directory: &str, rows: &RecordBatch) -> Result<Part> {
        let name = format!(
            "{}-{}.{}",
            self.name_prefix,
            self.parts_written,
            self.config.format.extension()
        );
        self.parts_written += 1;
        let directory = partition_path(&self.config.location.path, directory)?;
        let target = directory.clone().join(name.as_str());
        let in_progress = directory.join(format!(".{name}{IN_PROGRESS}").as_str());
        let upload = BufWriter::new(self.config.location.store.clone(), in_progress.clone());
        let body = match &self.config.format {
            FileFormat::Lines(format) => PartBody::Lines {
                upload: Box::new(upload),
                format: format.clone(),
                bytes: 0,
            },
            FileFormat::Parquet(parquet) => {
                PartBody::Parquet(Box::new(ParquetPart::new(parquet, upload, rows.schema())?))
            }
            FileFormat::Avro(avro) => {
                PartBody::Avro(Box::new(AvroPart::new(avro, upload, &rows.schema())?))
            }
        };
        Ok(Part {
            body,
            in_progress,
            target,
            opened: Instant::now(),
        })
    }

    /// Completes a part file: renamed at once, or kept hidden for a commit.
    async fn close_part(&mut self, part: Part) -> Result<()> {
        part.body.close().await?;
        match self.publish {
            true => {
                self.config
                    .location
                    .store
                    .rename(&part.in_progress, &part.target)
                    .await?
            }
            false => self.closed.push((part.in_progress, part.target)),
        }
        Ok(())
    }

    /// Completes every open part file.
    async fn close_parts(&mut self) -> Result<()> {
        for (_, part) in std::mem::take(&mut self.parts) {
            self.close_part(part).await?;
        }
        Ok(())
    }

    /// The success files of the partitions due now (every pending one when `all`).
    fn due_success_files(&mut self, all: bool) -> Result<Vec<Path>> {
        let Some(commit) = &self.config.commit else {
            return Ok(Vec::new());
        };
        let due = match all {
            true => self.pending.take_all(),
            false => self
                .pending
                .take_due(commit, wall_clock(), self.watermark)?,
        };
        due.iter()
            .map(|directory| {
                let directory = partition_path(&self.config.location.path, directory)?;
                Ok(directory.join(commit.success_file.as_str()))
            })
            .collect()
    }

    /// The writer's state: its partitions waiting for their commit.
    fn pending_state(&self) -> Vec<u8> {
        let mut out = StateWriter::new();
        self.pending.save(&mut out);
        out.finish()
    }

    fn restore_pending(&mut self, states: &[&[u8]]) -> Result<()> {
        for state in states.iter().filter(|s| !s.is_empty()) {
            let mut input = StateReader::new(state, "a filesystem sink's partitions");
            self.pending.load(&mut input)?;
        }
        Ok(())
    }
}

/// The directory of a partition (`k=v/k=v`, already escaped) under the table's path.
fn partition_path(table: &Path, directory: &str) -> Result<Path> {
    let mut path = table.clone();
    for segment in directory.split('/').filter(|s| !s.is_empty()) {
        let part = PathPart::parse(segment).map_err(|e| {
            EddyError::Internal(format!("partition directory '{directory}' is invalid: {e}"))
        })?;
        path = path.join(part);
    }
    Ok(path)
}

/// Writes the (empty) success files; writing one again is harmless.
async fn write_success_files(store: &dyn ObjectStore, files: &[Path]) -> Result<()> {
    for file in files {
        store.put(file, Vec::<u8>::new().into()).await?;
        tracing::info!(file = %file, "partition committed");
    }
    Ok(())
}

/// At least once or without guarantee: parts become visible when closed, and due
/// partitions are committed at once.
struct VisibleParts(PartWriter);

impl VisibleParts {
    async fn publish(&mut self, all: bool) -> Result<()> {
        self.0.close_parts().await?;
        let files = self.0.due_success_files(all)?;
        write_success_files(&*self.0.config.location.store, &files).await
    }
}

impl SinkWriter for VisibleParts {
    fn open<'a>(&'a mut self, restored: &'a [Vec<u8>]) -> BoxFuture<'a, Result<()>> {
        let states: Vec<&[u8]> = restored.iter().map(Vec::as_slice).collect();
        let restored = self.0.restore_pending(&states);
        async move { restored }.boxed()
    }

    fn write<'a>(&'a mut self, chunk: &'a Chunk) -> BoxFuture<'a, Result<()>> {
        self.0.write_chunk(chunk).boxed()
    }

    fn watermark(&mut self, watermark: Timestamp) {
        self.0.watermark = Some(watermark);
    }

    fn checkpoint(&mut self, _checkpoint: u64) -> BoxFuture<'_, Result<Vec<u8>>> {
        async {
            self.publish(false).await?;
            Ok(self.0.pending_state())
        }
        .boxed()
    }

    fn finish(&mut self, end: StreamEnd) -> BoxFuture<'_, Result<()>> {
        self.publish(end == StreamEnd::Finished).boxed()
    }
}

impl TransactionWriter for PartWriter {
    fn write<'a>(&'a mut self, chunk: &'a Chunk) -> BoxFuture<'a, Result<()>> {
        self.write_chunk(chunk).boxed()
    }

    fn watermark(&mut self, watermark: Timestamp) {
        self.watermark = Some(watermark);
    }

    fn prepares_without_rows(&self) -> bool {
        !self.pending.is_empty()
    }

    fn prepare(&mut self, _checkpoint: u64) -> BoxFuture<'_, Result<Option<Vec<u8>>>> {
        async move {
            self.close_parts().await?;
            let success = self.due_success_files(false)?;
            if self.closed.is_empty() && success.is_empty() {
                return Ok(None);
            }
            let transaction = FileTransaction {
                renames: std::mem::take(&mut self.closed),
                success,
            };
            Ok(Some(transaction.encode()))
        }
        .boxed()
    }

    fn abort(&mut self) -> BoxFuture<'_, Result<()>> {
        async move {
            let store = self.config.location.store.clone();
            for (_, part) in std::mem::take(&mut self.parts) {
                part.body.abort().await?;
                delete_if_present(&*store, &part.in_progress).await?;
            }
            for (hidden, _) in std::mem::take(&mut self.closed) {
                delete_if_present(&*store, &hidden).await?;
            }
            Ok(())
        }
        .boxed()
    }

    fn snapshot(&self) -> Vec<u8> {
        self.pending_state()
    }

    fn restore(&mut self, states: &[&[u8]]) -> Result<()> {
        self.restore_pending(states)
    }

    fn finish(&mut self) -> BoxFuture<'_, Result<()>> {
        async move {
            let files = self.due_success_files(true)?;
            write_success_files(&*self.config.location.store, &files).await
        }
        .boxed()
    }
}

/// What one checkpoint's transaction of a filesystem sink does when it commits: part files
/// to rename to their visible names, then partitions' success files to write.
#[derive(Debug, Default, PartialEq)]
struct FileTransaction {
    renames: Vec<(Path, Path)>,
    success: Vec<Path>,
}

impl FileTransaction {
    fn encode(&self) -> Vec<u8> {
        let mut out = StateWriter::new();
        out.u64(self.renames.len() as u64);
        for (hidden, target) in &self.renames {
            out.bytes(hidden.as_ref().as_bytes())
                .bytes(target.as_ref().as_bytes());
        }
        out.u64(self.success.len() as u64);
        for file in &self.success {
            out.bytes(file.as_ref().as_bytes());
        }
        out.finish()
    }

    /// Reads a handle (one written before partition commits existed holds renames only).
    fn decode(handle: &[u8]) -> Result<Self> {
        let mut input = StateReader::new(handle, "a filesystem sink transaction");
        let path = |input: &mut StateReader| -> Result<Path> {
            let text = std::str::from_utf8(input.bytes()?)
                .map_err(|_| EddyError::Internal("a part file name is not UTF-8".into()))?;
            Path::parse(text).map_err(|e| EddyError::Internal(format!("a part file name: {e}")))
        };
        let mut transaction = FileTransaction::default();
        for _ in 0..input.count(16)? {
            transaction
                .renames
                .push((path(&mut input)?, path(&mut input)?));
        }
        if !input.is_empty() {
            for _ in 0..input.count(8)? {
                transaction.success.push(path(&mut input)?);
            }
        }
        Ok(transaction)
    }
}

async fn delete_if_present(store: &dyn ObjectStore, path: &Path) -> Result<()> {
    match store.delete(path).await {
        Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Publishes and discards the part files of one sink subtask.
struct FileCommitter {
    /// The table's directory.
    location: StorageLocation,
    /// `.part-{job}-`: hidden files of this job's sink.
    hidden_prefix: String,
    /// Part files are in partition directories below `directory`.
    partitioned: bool,
    subtask: usize,
    parallelism: usize,
    token: AttemptToken,
}

impl FileCommitter {
    /// Whether a file is a hidden part file (`.part-{job}-{token}-{subtask}-…`) an
    /// earlier attempt of this subtask (or of one it took over) left.
    fn is_leftover(&self, name: &str) -> bool {
        let Some(rest) = name
            .strip_prefix(&self.hidden_prefix)
            .and_then(|r| r.strip_suffix(IN_PROGRESS))
        else {
            return false;
        };
        let mut parts = rest.split('-');
        let token = parts.next().and_then(AttemptToken::parse);
        let writer: Option<usize> = parts.next().and_then(|w| w.parse().ok());
        match (token, writer) {
            (Some(token), Some(writer)) => {
                writer % self.parallelism == self.subtask && self.token.supersedes(&token)
            }
            _ => false,
        }
    }
}

impl TransactionCommitter for FileCommitter {
    fn commit<'a>(&'a self, handle: &'a [u8]) -> BoxFuture<'a, Result<()>> {
        async move {
            let transaction = FileTransaction::decode(handle)?;
            for (hidden, target) in transaction.renames {
                match self.location.store.rename(&hidden, &target).await {
                    Ok(()) => {}
                    Err(object_store::Error::NotFound { .. }) => {
                        // Renamed by an earlier commit of the same transaction?
                        if self.location.store.head(&target).await.is_err() {
                            return Err(EddyError::External {
                                system: "object storage",
                                message: format!(
                                    "pending part file '{hidden}' is gone and '{target}' does \
                                     not exist"
                                ),
                            });
                        }
                    }
                    Err(e) => return Err(e.into()),
                }
            }
            write_success_files(&*self.location.store, &transaction.success).await
        }
        .boxed()
    }

    fn abort_leftovers<'a>(&'a self, keep: &'a [Vec<u8>]) -> BoxFuture<'a, Result<()>> {
        async move {
            let mut kept = HashSet::new();
            for handle in keep {
                let renames = FileTransaction::decode(handle)?.renames;
                kept.extend(renames.into_iter().map(|(hidden, _)| hidden));
            }
            let (store, directory) = (&self.location.store, &self.location.path);
            let listing = match self.partitioned {
                false => store.list_with_delimiter(Some(directory)).await?.objects,
                true => store.list(Some(directory)).try_collect().await?,
            };
            for object in listing {
                let Some(name) = object.location.filename() else {
                    continue;
                };
                if self.is_leftover(name) && !kept.contains(&object.location) {
                    tracing::info!(file = %object.location, "deleting a part file an earlier attempt left uncommitted");
                    delete_if_present(&**store, &object.location).await?;
                }
            }
            // Uploads a killed attempt left unfinished, which the listing does not show.
            let unfinished = self
                .location
                .delete_unfinished_uploads(directory, self.partitioned, |name| {
                    self.is_leftover(name)
                })
                .await?;
            for file in unfinished {
                tracing::info!(%file, "deleted a part file an earlier attempt left half-written");
            }
            Ok(())
        }
        .boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use eddy_common::object_storage::resolve;

    /// A directory holding `files` (relative paths), empty at first.
    fn directory_with(name: &str, files: &[&str]) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("eddy-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for file in files {
            let path = dir.join(file);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, b"1,2\n").unwrap();
        }
        dir
    }

    /// The files left under `dir`, as relative paths, sorted.
    fn files_under(dir: &std::path::Path) -> Vec<String> {
        let mut files = Vec::new();
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                let inner = files_under(&path);
                let name = path.file_name().unwrap().to_str().unwrap().to_string();
                files.extend(inner.into_iter().map(|f| format!("{name}/{f}")));
            } else {
                files.push(path.file_name().unwrap().to_str().unwrap().to_string());
            }
        }
        files.sort();
        files
    }

    /// The committer of subtask 0 of 2 of job `j`, attempt 2.
    fn committer(dir: &std::path::Path, partitioned: bool) -> (FileCommitter, AttemptToken) {
        let token = AttemptToken::new(2);
        let committer = FileCommitter {
            location: resolve(dir.to_str().unwrap(), &[]).unwrap(),
            hidden_prefix: ".part-j-".into(),
            partitioned,
            subtask: 0,
            parallelism: 2,
            token: token.clone(),
        };
        (committer, token)
    }

    #[tokio::test]
    async fn a_restarted_sink_deletes_the_half_written_part_files_of_killed_attempts() {
        let dir = directory_with(
            "file-sink-unfinished",
            &[
                ".part-j-a1t5-0-0.csv.inprogress",
                ".part-j-a1t5-0-1.csv.inprogress#1",
                ".part-j-a1t5-2-4.csv.inprogress#12",
                ".part-j-a1t5-1-0.csv.inprogress#1",
                ".part-k-a1t5-0-0.csv.inprogress#1",
                "part-j-a1t5-0-2.csv",
                "part-j-a1t5-0-3.csv#1",
                "notes#draft",
            ],
        );
        let (committer, current) = committer(&dir, false);
        // The restarted attempt's own upload, under way.
        let own = format!(".part-j-{current}-0-0.csv.inprogress#1");
        std::fs::write(dir.join(&own), b"").unwrap();
        committer.abort_leftovers(&[]).await.unwrap();
        let mut expected = vec![
            own,
            ".part-j-a1t5-1-0.csv.inprogress#1".to_string(),
            ".part-k-a1t5-0-0.csv.inprogress#1".to_string(),
            "notes#draft".to_string(),
            "part-j-a1t5-0-2.csv".to_string(),
            "part-j-a1t5-0-3.csv#1".to_string(),
        ];
        expected.sort();
        assert_eq!(files_under(&dir), expected);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[tokio::test]
    async fn half_written_part_files_in_partition_directories_are_deleted_when_partitioned() {
        let files = [
            "dt=1/.part-j-a1t5-0-0.csv.inprogress#1",
            "dt=2/hour=3/.part-j-a1t5-2-1.csv.inprogress#2",
            "dt=2/part-j-a1t5-0-2.csv",
        ];
        let dir = directory_with("file-sink-unfinished-partitions", &files);
        committer(&dir, false).0.abort_leftovers(&[]).await.unwrap();
        assert_eq!(
            files_under(&dir).len(),
            3,
            "an unpartitioned sink looks at its directory only"
        );
        committer(&dir, true).0.abort_leftovers(&[]).await.unwrap();
        assert_eq!(
            files_under(&dir),
            vec!["dt=2/part-j-a1t5-0-2.csv".to_string()]
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
