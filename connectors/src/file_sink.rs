//! The filesystem sink: part files written under hidden in-progress names (`.part-…`,
//! which readers skip) and given their visible names when they are done.
//!
//! Exactly once, a closed part file stays hidden until its checkpoint completes, so a
//! reader listing the directory never sees uncommitted or duplicate rows: the checkpoint
//! records the pending files, the commit renames them (on S3 a server-side copy; renaming
//! a file that was already renamed is success), and a restarted sink deletes the hidden
//! files earlier attempts left behind. At least once (or without checkpoints), a part file
//! becomes visible as soon as it is closed: when it rolls, at each checkpoint and at the end.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use eddy_common::chunk::Chunk;
use eddy_common::event::StreamEnd;
use eddy_common::metrics::OperatorMetrics;
use eddy_common::object_storage::StorageLocation;
use eddy_common::state::{StateReader, StateWriter};
use eddy_common::{EddyError, Result};
use futures::FutureExt;
use futures::future::BoxFuture;
use object_store::buffered::BufWriter;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};
use tokio::io::AsyncWriteExt;

use super::format::Format;
use super::transaction::{
    AttemptToken, DeliveryGuarantee, TransactionCommitter, TransactionWriter, TwoPhaseCommitSink,
};
use super::{SinkContext, SinkWriter};

const IN_PROGRESS: &str = ".inprogress";

/// How a filesystem table is written.
#[derive(Debug, Clone)]
pub struct FileSinkConfig {
    /// The directory.
    pub location: StorageLocation,
    /// CSV or JSON lines.
    pub format: Format,
    /// A part file is closed once it holds this many bytes.
    pub rolling_file_size: u64,
    /// A part file is closed once it has been open this long.
    pub rollover_interval: Option<Duration>,
    /// `'sink.delivery-guarantee'`; by default exactly once when the job checkpoints.
    pub guarantee: Option<DeliveryGuarantee>,
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
        part: None,
        parts_written: 0,
        buffer: Vec::new(),
        publish: !exactly_once,
        closed: Vec::new(),
    };
    if !exactly_once {
        return Ok(Box::new(VisibleParts(parts)));
    }
    let committer = FileCommitter {
        store: config.location.store.clone(),
        directory: config.location.path.clone(),
        hidden_prefix: format!(".{}", parts.job_prefix),
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
    writer: BufWriter,
    in_progress: Path,
    target: Path,
    bytes: u64,
    opened: Instant,
}

/// Writes rows into rolling part files.
struct PartWriter {
    config: FileSinkConfig,
    /// `part-{job}-`: the start of every file name of this job.
    job_prefix: String,
    /// `part-{job}-a{attempt}t{time}-{subtask}`: unique to this writer.
    name_prefix: String,
    metrics: Arc<OperatorMetrics>,
    part: Option<Part>,
    parts_written: u64,
    buffer: Vec<u8>,
    /// Whether a closed part is renamed at once (or kept hidden for a commit).
    publish: bool,
    /// Closed parts still hidden, as (hidden, visible) names.
    closed: Vec<(Path, Path)>,
}

impl PartWriter {
    async fn write_chunk(&mut self, chunk: &Chunk) -> Result<()> {
        if chunk.is_empty() {
            return Ok(());
        }
        self.buffer.clear();
        self.config.format.encode(chunk.rows(), &mut self.buffer)?;
        if self.part.is_none() {
            let name = format!(
                "{}-{}.{}",
                self.name_prefix,
                self.parts_written,
                self.config.format.extension()
            );
            let directory = &self.config.location.path;
            let target = directory.clone().join(name.as_str());
            let in_progress = directory
                .clone()
                .join(format!(".{name}{IN_PROGRESS}").as_str());
            let writer = BufWriter::new(self.config.location.store.clone(), in_progress.clone());
            self.part = Some(Part {
                writer,
                in_progress,
                target,
                bytes: 0,
                opened: Instant::now(),
            });
        }
        let part = self.part.as_mut().expect("part open");
        part.writer.write_all(&self.buffer).await?;
        part.bytes += self.buffer.len() as u64;
        OperatorMetrics::add(&self.metrics.records_in, chunk.num_rows() as u64);
        let too_old = self
            .config
            .rollover_interval
            .is_some_and(|limit| part.opened.elapsed() >= limit);
        if part.bytes >= self.config.rolling_file_size || too_old {
            self.close_part().await?;
        }
        Ok(())
    }

    /// Completes the open part file: renamed at once, or kept hidden for a commit.
    async fn close_part(&mut self) -> Result<()> {
        if let Some(mut part) = self.part.take() {
            part.writer.shutdown().await?;
            self.parts_written += 1;
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
        }
        Ok(())
    }
}

/// At least once or without guarantee: parts become visible when closed.
struct VisibleParts(PartWriter);

impl SinkWriter for VisibleParts {
    fn write<'a>(&'a mut self, chunk: &'a Chunk) -> BoxFuture<'a, Result<()>> {
        self.0.write_chunk(chunk).boxed()
    }

    fn checkpoint(&mut self, _checkpoint: u64) -> BoxFuture<'_, Result<Vec<u8>>> {
        async { self.0.close_part().await.map(|()| Vec::new()) }.boxed()
    }

    fn finish(&mut self, _end: StreamEnd) -> BoxFuture<'_, Result<()>> {
        self.0.close_part().boxed()
    }
}

impl TransactionWriter for PartWriter {
    fn write<'a>(&'a mut self, chunk: &'a Chunk) -> BoxFuture<'a, Result<()>> {
        self.write_chunk(chunk).boxed()
    }

    fn prepare(&mut self, _checkpoint: u64) -> BoxFuture<'_, Result<Option<Vec<u8>>>> {
        async move {
            self.close_part().await?;
            if self.closed.is_empty() {
                return Ok(None);
            }
            Ok(Some(encode_renames(&std::mem::take(&mut self.closed))))
        }
        .boxed()
    }

    fn abort(&mut self) -> BoxFuture<'_, Result<()>> {
        async move {
            let store = self.config.location.store.clone();
            if let Some(mut part) = self.part.take() {
                part.writer.abort().await?;
                delete_if_present(&*store, &part.in_progress).await?;
            }
            for (hidden, _) in std::mem::take(&mut self.closed) {
                delete_if_present(&*store, &hidden).await?;
            }
            Ok(())
        }
        .boxed()
    }
}

fn encode_renames(renames: &[(Path, Path)]) -> Vec<u8> {
    let mut out = StateWriter::new();
    out.u64(renames.len() as u64);
    for (hidden, target) in renames {
        out.bytes(hidden.as_ref().as_bytes())
            .bytes(target.as_ref().as_bytes());
    }
    out.finish()
}

fn decode_renames(handle: &[u8]) -> Result<Vec<(Path, Path)>> {
    let mut input = StateReader::new(handle, "a filesystem sink transaction");
    let path = |input: &mut StateReader| -> Result<Path> {
        let text = std::str::from_utf8(input.bytes()?)
            .map_err(|_| EddyError::Internal("a part file name is not UTF-8".into()))?;
        Ok(Path::from(text))
    };
    (0..input.count(16)?)
        .map(|_| Ok((path(&mut input)?, path(&mut input)?)))
        .collect()
}

async fn delete_if_present(store: &dyn ObjectStore, path: &Path) -> Result<()> {
    match store.delete(path).await {
        Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Publishes and discards the part files of one sink subtask.
struct FileCommitter {
    store: Arc<dyn ObjectStore>,
    directory: Path,
    /// `.part-{job}-`: hidden files of this job's sink.
    hidden_prefix: String,
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
            for (hidden, target) in decode_renames(handle)? {
                match self.store.rename(&hidden, &target).await {
                    Ok(()) => {}
                    Err(object_store::Error::NotFound { .. }) => {
                        // Renamed by an earlier commit of the same transaction?
                        if self.store.head(&target).await.is_err() {
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
            Ok(())
        }
        .boxed()
    }

    fn abort_leftovers<'a>(&'a self, keep: &'a [Vec<u8>]) -> BoxFuture<'a, Result<()>> {
        async move {
            let mut kept = HashSet::new();
            for handle in keep {
                kept.extend(decode_renames(handle)?.into_iter().map(|(hidden, _)| hidden));
            }
            let listing = self.store.list_with_delimiter(Some(&self.directory)).await?;
            for object in listing.objects {
                let Some(name) = object.location.filename() else {
                    continue;
                };
                if self.is_leftover(name) && !kept.contains(&object.location) {
                    tracing::info!(file = %object.location, "deleting a part file an earlier attempt left uncommitted");
                    delete_if_present(&*self.store, &object.location).await?;
                }
            }
            Ok(())
        }
        .boxed()
    }
}
