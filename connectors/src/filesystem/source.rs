//! Reading CSV, JSON-lines or Parquet files. Every line file is cut into byte-range splits
//! of at most `source.split-size` bytes, every Parquet file into its row groups (a split's
//! range is then rows of the file), and the splits are dealt round-robin over the
//! subtasks, so one large file is read by all of them. A split of lines owns the lines that
//! start inside its range: it skips the partial line it starts in and finishes the line it
//! ends in.
//!
//! A subtask reads its splits of one file one after another, in file order, as one lane
//! with one watermark (as a single reader of the file would); it reads the lanes of
//! different files interleaved, each keeping its own watermark, so reading one file after
//! another never turns rows late. Memory grows with the files read at once, not with the
//! size of a file.

use std::collections::{HashMap, HashSet, VecDeque};
use std::io::{Read, Seek, SeekFrom};
use std::ops::Range;

use arrow::datatypes::SchemaRef;
use bytes::Bytes;
use eddy_common::chunk::Chunk;
use eddy_common::object_storage::StorageLocation;
use eddy_common::state::{StateReader, StateWriter};
use eddy_common::{EddyError, Result};
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::{FutureExt, StreamExt, TryStreamExt};
use object_store::path::Path;
use object_store::{
    GetOptions, GetRange, GetResult, GetResultPayload, ObjectStore, ObjectStoreExt,
};

use super::FileFormat;
use super::avro::AvroFileRows;
use super::metadata::{FileColumns, FileFacts};
use super::parquet::{ParquetFooter, ParquetRows, Pushdown, RowGroupRead};
use super::partitions::PartitionColumns;
use crate::format::LinePosition;
use crate::{SourceContext, SourceEvent, SourceReader};

/// Marks a position written by this reader (byte offsets per split); earlier readers kept
/// a line number per whole file.
pub(crate) const POSITION_FORMAT: u64 = 0xEDD7_5917_0000_0002;

/// What a filesystem source reads, and how.
#[derive(Debug, Clone)]
pub struct FileSourceConfig {
    /// The file or directory.
    pub location: StorageLocation,
    /// How the files are decoded.
    pub format: FileFormat,
    /// Skip (and count) malformed records instead of failing.
    pub ignore_parse_errors: bool,
    /// The largest byte range one split covers.
    pub split_size: u64,
    /// The table's columns.
    pub schema: SchemaRef,
    /// `PARTITIONED BY`: the files hold the other columns; these come from their paths.
    pub partitions: Option<std::sync::Arc<PartitionColumns>>,
}

impl FileSourceConfig {
    /// The columns the files hold: the table's, less its partition columns.
    fn data_schema(&self) -> &SchemaRef {
        match &self.partitions {
            Some(partitions) => partitions.data_schema(),
            None => &self.schema,
        }
    }
}

/// A range of one file: bytes, of which it owns the lines that start in `start..end`; or
/// of a Parquet file, the rows `start..end` of one row group.
#[derive(Debug, Clone, PartialEq, Eq)]
struct FileSplit {
    path: Path,
    start: u64,
    end: u64,
    /// What the store says of the file (for metadata columns).
    file: FileFacts,
}

/// How far a split has been read: `next` is the offset of the first line (or row) not yet
/// returned (`>= end` once the split is done); `lines` counts the lines (rows) returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct SplitProgress {
    end: u64,
    next: u64,
    lines: u64,
}

/// Creates the reader of one subtask.
pub fn create(config: &FileSourceConfig, context: &SourceContext) -> Result<Box<dyn SourceReader>> {
    let metadata = FileColumns::new(&context.metadata).map_err(|message| EddyError::Connector {
        table: context.table.clone(),
        message,
    })?;
    Ok(Box::new(FileReader {
        config: config.clone(),
        context: context.clone(),
        metadata,
        lanes: None,
        cursor: 0,
        finished: Vec::new(),
        restored: HashMap::new(),
        footers: HashMap::new(),
    }))
}

/// The bytes of an object, as they arrive.
type ByteStream = BoxStream<'static, object_store::Result<Bytes>>;

/// How many bytes one read of a local file takes. (`object_store` reads 8 KiB at a time,
/// each on a blocking thread: handing the reads over cost more than making them.)
const LOCAL_READ_SIZE: u64 = 1 << 20;

/// The bytes of a `get`: a local file in large reads, anything else as it streams.
fn byte_stream(result: GetResult) -> ByteStream {
    match result.payload {
        GetResultPayload::File(file, _) => local_reads(file, result.range),
        GetResultPayload::Stream(stream) => stream,
    }
}

/// Reads `range` of a local file, [`LOCAL_READ_SIZE`] bytes per blocking call.
fn local_reads(file: std::fs::File, range: Range<u64>) -> ByteStream {
    futures::stream::try_unfold((file, range.start), move |(mut file, offset)| async move {
        if offset >= range.end {
            return Ok(None);
        }
        let len = (range.end - offset).min(LOCAL_READ_SIZE);
        let read = tokio::task::spawn_blocking(move || {
            file.seek(SeekFrom::Start(offset))?;
            let mut buffer = Vec::with_capacity(len as usize);
            (&mut file).take(len).read_to_end(&mut buffer)?;
            Ok::<_, std::io::Error>((file, buffer))
        })
        .await
        .map_err(std::io::Error::other)
        .and_then(|read| read);
        match read {
            Ok((_, buffer)) if buffer.is_empty() => Ok(None),
            Ok((file, buffer)) => {
                let next = offset + buffer.len() as u64;
                Ok(Some((Bytes::from(buffer), (file, next))))
            }
            Err(error) => Err(object_store::Error::Generic {
                store: "LocalFileSystem",
                source: Box::new(error),
            }),
        }
    })
    .boxed()
}

/// One split being read.
struct OpenSplit {
    /// The file's name as shown to users.
    name: String,
    split: FileSplit,
    progress: SplitProgress,
    body: SplitBody,
}

/// What a split is read with.
enum SplitBody {
    /// The bytes of a line file.
    Lines(LineBuffer),
    /// The batches of a Parquet row group.
    Parquet(ParquetRows),
    /// The batches of an Avro file.
    Avro(Box<AvroFileRows>),
}

/// The bytes of a split of lines, as they arrive.
struct LineBuffer {
    stream: Option<ByteStream>,
    /// Bytes read and not yet returned; they start at `progress.next` (or, while
    /// `skip_partial` is set, somewhere before the first line this split owns).
    pending: Vec<u8>,
    /// How many line ends `pending` holds (kept as bytes come and go, so that no read
    /// scans the whole buffer again).
    pending_lines: usize,
    /// The split starts inside a line that the previous split owns: drop it first.
    skip_partial: bool,
    /// While skipping, the file offset of `pending`'s first byte.
    skipped_to: u64,
}

/// This subtask's splits of one file, read one after another.
struct Lane {
    /// Its index among the reader's lanes (its watermark's).
    index: usize,
    /// The split being read.
    current: OpenSplit,
    /// The splits after it, and how far each has been read (restored mid-way or not yet).
    queued: VecDeque<(FileSplit, SplitProgress)>,
}

struct FileReader {
    config: FileSourceConfig,
    context: SourceContext,
    /// The metadata columns appended to the table's.
    metadata: FileColumns,
    lanes: Option<Vec<Lane>>,
    cursor: usize,
    /// This subtask's splits read to their end.
    finished: Vec<(String, u64, SplitProgress)>,
    /// Progress of the previous run, by file name and split start.
    restored: HashMap<(String, u64), SplitProgress>,
    /// The footers of the Parquet files read.
    footers: Footers,
}

/// Parquet footers by file.
type Footers = HashMap<Path, ParquetFooter>;

/// Every split of the source, in the same order in every subtask: each visible file under
/// the path, sorted, cut into ranges of at most `split_size` bytes (a Parquet file into its
/// row groups, whose footers land in `footers`). A file the `restored` positions know is
/// cut as it was then, so a changed split size never reads a line twice.
async fn all_splits(
    config: &FileSourceConfig,
    table: &str,
    restored: &HashMap<(String, u64), SplitProgress>,
    footers: &mut Footers,
) -> Result<Vec<FileSplit>> {
    let location = &config.location;
    let files: Vec<(Path, FileFacts)> = match location.store.head(&location.path).await {
        Ok(meta) => vec![(meta.location.clone(), FileFacts::from(&meta))],
        Err(_) => {
            let mut files: Vec<(Path, FileFacts)> = location
                .store
                .list(Some(&location.path))
                .map_ok(|meta| (meta.location.clone(), FileFacts::from(&meta)))
                .try_collect()
                .await?;
            files.retain(|(p, _)| {
                p.filename()
                    .is_some_and(|name| !name.starts_with('.') && !name.starts_with('_'))
            });
            files.sort_by(|a, b| a.0.cmp(&b.0));
            files
        }
    };
    if files.is_empty() {
        return Err(EddyError::Connector {
            table: table.to_string(),
            message: format!("no files at '{}'", location.display),
        });
    }
    let mut splits = Vec::new();
    for (path, file) in files {
        let name = location.show(&path);
        let mut known: Vec<(u64, u64)> = restored
            .iter()
            .filter(|((file, _), _)| *file == name)
            .map(|((_, start), progress)| (*start, progress.end))
            .collect();
        if known.is_empty() {
            known = match config.format {
                FileFormat::Lines(_) => cut(file.size, config.split_size),
                // A container file is one split: its rows, counted from 0.
                FileFormat::Avro(_) => vec![(0, file.size)],
                FileFormat::Parquet(_) => {
                    let footer = ParquetFooter::read(location, &path, file.size, &name).await?;
                    let ranges = footer.row_ranges();
                    footers.insert(path.clone(), footer);
                    ranges
                }
            };
        }
        known.sort_unstable();
        splits.extend(known.into_iter().map(|(start, end)| FileSplit {
            path: path.clone(),
            start,
            end,
            file,
        }));
    }
    Ok(splits)
}

/// Opens `split` to read from where `progress` says.
async fn open_split(
    config: &FileSourceConfig,
    context: &SourceContext,
    footers: &mut Footers,
    split: FileSplit,
    progress: SplitProgress,
) -> Result<OpenSplit> {
    let location = &config.location;
    let name = location.show(&split.path);
    let body = match config.format {
        FileFormat::Lines(_) => {
            SplitBody::Lines(LineBuffer::open(location, &split, &progress).await?)
        }
        FileFormat::Parquet(_) => {
            if !footers.contains_key(&split.path) {
                let footer =
                    ParquetFooter::read(location, &split.path, split.file.size, &name).await?;
                footers.insert(split.path.clone(), footer);
            }
            let rows = RowGroupRead {
                start: split.start,
                next: progress.next,
                file_size: split.file.size,
                batch_size: context.batch_size,
            };
            let used: Option<HashSet<&str>> = context.columns_used.as_ref().map(|used| {
                let fields = context.schema.fields();
                used.iter().map(|i| fields[*i].name().as_str()).collect()
            });
            let footer = &footers[&split.path];
            let schema = config.data_schema();
            let pushdown = Pushdown {
                used: used.as_ref(),
                bounds: &context.bounds,
            };
            let read = footer.open(location, &split.path, rows, schema, &pushdown, &name);
            SplitBody::Parquet(read?)
        }
        FileFormat::Avro(_) => {
            let (next, batch_size) = (progress.next, context.batch_size);
            let schema = config.data_schema();
            let rows =
                AvroFileRows::open(location, &split.path, next, batch_size, schema, &name).await?;
            SplitBody::Avro(Box::new(rows))
        }
    };
    Ok(OpenSplit {
        name,
        split,
        progress,
        body,
    })
}

impl LineBuffer {
    /// Starts reading the bytes of `split` from where `progress` says.
    async fn open(
        location: &StorageLocation,
        split: &FileSplit,
        progress: &SplitProgress,
    ) -> Result<Self> {
        // A fresh split that does not start a file begins one byte early: if that byte
        // ends a line, the split's first line starts exactly at `start`.
        let skip_partial = progress.next == split.start && split.start > 0;
        let from = if skip_partial {
            split.start - 1
        } else {
            progress.next
        };
        let options = GetOptions {
            range: Some(GetRange::Offset(from)),
            ..GetOptions::default()
        };
        let stream = byte_stream(location.store.get_opts(&split.path, options).await?);
        Ok(LineBuffer {
            stream: Some(stream),
            pending: Vec::new(),
            pending_lines: 0,
            skip_partial,
            skipped_to: from,
        })
    }
}

impl FileReader {
    /// A lane over `splits` (of one file, in order), its first split opened.
    async fn lane(
        &mut self,
        index: usize,
        mut splits: VecDeque<(FileSplit, SplitProgress)>,
    ) -> Result<Lane> {
        let (split, progress) = splits.pop_front().expect("a lane has a split");
        let current = open_split(
            &self.config,
            &self.context,
            &mut self.footers,
            split,
            progress,
        );
        Ok(Lane {
            index,
            current: current.await?,
            queued: splits,
        })
    }

    async fn open_lanes(&mut self) -> Result<usize> {
        let subtask = self.context.subtask;
        let parallelism = self.context.parallelism;
        let mut lanes: Vec<Lane> = Vec::new();
        let mut queued: VecDeque<(FileSplit, SplitProgress)> = VecDeque::new();
        let table = &self.context.table;
        let splits = all_splits(&self.config, table, &self.restored, &mut self.footers).await?;
        for (i, split) in splits.into_iter().enumerate() {
            if i % parallelism != subtask {
                continue;
            }
            let name = self.config.location.show(&split.path);
            let progress = self
                .restored
                .get(&(name.clone(), split.start))
                .copied()
                .unwrap_or(SplitProgress {
                    end: split.end,
                    next: split.start,
                    lines: 0,
                });
            if progress.next >= split.end {
                self.finished.push((name, split.start, progress));
                continue;
            }
            if queued
                .front()
                .is_some_and(|(first, _)| first.path != split.path)
            {
                let lane = self.lane(lanes.len(), std::mem::take(&mut queued)).await?;
                lanes.push(lane);
            }
            queued.push_back((split, progress));
        }
        if !queued.is_empty() {
            let lane = self.lane(lanes.len(), queued).await?;
            lanes.push(lane);
        }
        let count = lanes.len();
        self.lanes = Some(lanes);
        Ok(count)
    }

    async fn next_rows(&mut self) -> Result<Option<SourceEvent>> {
        let Some(lanes) = self.lanes.as_mut() else {
            return Err(EddyError::Internal(
                "filesystem reader used before open".into(),
            ));
        };
        loop {
            if lanes.is_empty() {
                return Ok(None);
            }
            self.cursor %= lanes.len();
            let lane = &mut lanes[self.cursor];
            let Some(decoded) = read_split(&self.config, &self.context, &mut lane.current).await?
            else {
                let done = &lane.current;
                let mut progress = done.progress;
                progress.next = progress.next.max(done.split.end);
                self.finished
                    .push((done.name.clone(), done.split.start, progress));
                if let Some((split, progress)) = lane.queued.pop_front() {
                    let (config, context) = (&self.config, &self.context);
                    lane.current =
                        open_split(config, context, &mut self.footers, split, progress).await?;
                    continue;
                }
                let done = lanes.remove(self.cursor);
                return Ok(Some(SourceEvent::SplitEnd(done.index)));
            };
            self.cursor += 1;
            let Some(mut rows) = decoded else {
                continue;
            };
            let split = &lane.current;
            if let Some(partitions) = &self.config.partitions {
                let relative = split.split.path.as_ref();
                let relative = relative
                    .strip_prefix(self.config.location.path.as_ref())
                    .unwrap_or(relative);
                let values = partitions.values_of(relative);
                rows = rows.with_rows(partitions.attach(rows.rows(), &values, &split.name)?);
            }
            if !self.metadata.is_empty() {
                let schema = &self.context.schema;
                let file = &split.split;
                rows = self.metadata.append(rows, schema, &file.path, &file.file)?;
            }
            return Ok(Some(SourceEvent::Rows {
                split: lane.index,
                rows,
            }));
        }
    }
}

/// Reads the next rows of `split`: `None` once it is exhausted, `Some(None)` when what was
/// read made no rows (malformed lines skipped).
async fn read_split(
    config: &FileSourceConfig,
    context: &SourceContext,
    split: &mut OpenSplit,
) -> Result<Option<Option<Chunk>>> {
    let bulk = match &mut split.body {
        SplitBody::Parquet(rows) => Some(rows.next().await?),
        SplitBody::Avro(rows) => Some(rows.next()?),
        SplitBody::Lines(_) => None,
    };
    if let Some(batch) = bulk {
        let Some(batch) = batch else {
            return Ok(None);
        };
        split.progress.next += batch.num_rows() as u64;
        split.progress.lines += batch.num_rows() as u64;
        return Ok(Some(Some(Chunk::inserts(batch))));
    }
    let FileFormat::Lines(format) = &config.format else {
        return Err(EddyError::Internal(
            "a line split of a Parquet table".into(),
        ));
    };
    let Some((lines, count)) = fill_lines(split, context.batch_size).await? else {
        return Ok(None);
    };
    let shown = match split.split.start {
        0 => split.name.clone(),
        start => format!("{} (the split from byte {start})", split.name),
    };
    let position = LinePosition {
        file: &shown,
        first_line: split.progress.lines + 1,
    };
    split.progress.lines += count as u64;
    let decoded = format.decode(
        config.data_schema(),
        &lines,
        position,
        config.ignore_parse_errors,
        &context.metrics,
    )?;
    Ok(Some(decoded))
}

/// Cuts `size` bytes into ranges of at most `split_size` (one empty range for an empty
/// file).
fn cut(size: u64, split_size: u64) -> Vec<(u64, u64)> {
    let split_size = split_size.max(1);
    let mut ranges: Vec<(u64, u64)> = (0..size.div_ceil(split_size))
        .map(|i| (i * split_size, ((i + 1) * split_size).min(size)))
        .collect();
    if ranges.is_empty() {
        ranges.push((0, 0));
    }
    ranges
}

/// Reads until the split holds `max_lines` complete lines it owns (or it ends), and takes
/// those lines out with their count; `None` when the split is exhausted.
async fn fill_lines(split: &mut OpenSplit, max_lines: usize) -> Result<Option<(Vec<u8>, usize)>> {
    let OpenSplit {
        split: range,
        progress,
        body,
        ..
    } = split;
    let SplitBody::Lines(buffer) = body else {
        return Err(EddyError::Internal(
            "lines read from a Parquet split".into(),
        ));
    };
    loop {
        if buffer.skip_partial {
            if let Some(i) = memchr::memchr(b'\n', &buffer.pending) {
                buffer.pending.drain(..=i);
                buffer.pending_lines -= 1;
                buffer.skip_partial = false;
                progress.next = buffer.skipped_to + i as u64 + 1;
                continue;
            }
            buffer.skipped_to += buffer.pending.len() as u64;
            buffer.pending.clear();
        } else {
            // Every line the split owns is complete once a line end at or past
            // `end - 1` has been read.
            let owns_no_more = || {
                memchr::memrchr(b'\n', &buffer.pending)
                    .is_some_and(|i| progress.next + i as u64 + 1 >= range.end)
            };
            if buffer.pending_lines >= max_lines || buffer.stream.is_none() || owns_no_more() {
                break;
            }
        }
        let Some(stream) = buffer.stream.as_mut() else {
            // The file ended inside the partial line: this split owns nothing.
            break;
        };
        match stream.next().await {
            Some(bytes) => {
                let bytes = bytes?;
                buffer.pending_lines += memchr::memchr_iter(b'\n', &bytes).count();
                buffer.pending.extend_from_slice(&bytes);
            }
            None => buffer.stream = None,
        }
    }
    if buffer.skip_partial || progress.next >= range.end || buffer.pending.is_empty() {
        return Ok(None);
    }
    let (cut, count, done) = owned_lines(
        &buffer.pending,
        progress.next,
        range.end,
        max_lines,
        buffer.stream.is_none(),
    );
    let rest = buffer.pending.split_off(cut);
    let mut lines = std::mem::replace(&mut buffer.pending, rest);
    buffer.pending_lines -= count.min(buffer.pending_lines);
    progress.next += cut as u64;
    if done {
        progress.next = progress.next.max(range.end);
        buffer.stream = None;
        buffer.pending.clear();
        buffer.pending_lines = 0;
    }
    if lines.last() != Some(&b'\n') {
        lines.push(b'\n');
    }
    Ok(Some((lines, count)))
}

/// Of `pending` (which starts at file offset `offset`), the lines to take: at most
/// `max_lines`, only those starting before `end`, and — once the file has ended — the
/// last line even without its line end. Returns the byte count to take, the line count,
/// and whether the split has no more lines after them.
fn owned_lines(
    pending: &[u8],
    offset: u64,
    end: u64,
    max_lines: usize,
    file_ended: bool,
) -> (usize, usize, bool) {
    let mut cut = 0usize;
    let mut count = 0usize;
    for newline in memchr::memchr_iter(b'\n', pending) {
        if count == max_lines || offset + cut as u64 >= end {
            break;
        }
        cut = newline + 1;
        count += 1;
    }
    let next_start = offset + cut as u64;
    if next_start >= end {
        return (cut, count, true);
    }
    if file_ended && count < max_lines && cut < pending.len() {
        // The file's last line, without a line end.
        return (pending.len(), count + 1, true);
    }
    (cut, count, file_ended && cut == pending.len())
}

impl SourceReader for FileReader {
    fn open(&mut self) -> BoxFuture<'_, Result<usize>> {
        self.open_lanes().boxed()
    }

    fn next(&mut self) -> BoxFuture<'_, Result<Option<SourceEvent>>> {
        self.next_rows().boxed()
    }

    fn position(&mut self, _checkpoint: u64) -> Result<Vec<u8>> {
        let mut entries: Vec<(&str, u64, SplitProgress)> = self
            .finished
            .iter()
            .map(|(name, start, progress)| (name.as_str(), *start, *progress))
            .collect();
        match &self.lanes {
            Some(lanes) => {
                for lane in lanes {
                    let current = &lane.current;
                    entries.push((current.name.as_str(), current.split.start, current.progress));
                    entries.extend(
                        lane.queued.iter().map(|(split, progress)| {
                            (current.name.as_str(), split.start, *progress)
                        }),
                    );
                }
            }
            // Not open yet: what was restored still stands.
            None => entries.extend(
                self.restored
                    .iter()
                    .map(|((name, start), progress)| (name.as_str(), *start, *progress)),
            ),
        }
        let mut out = StateWriter::new();
        out.u64(POSITION_FORMAT).u64(entries.len() as u64);
        for (name, start, progress) in entries {
            out.bytes(name.as_bytes())
                .u64(start)
                .u64(progress.end)
                .u64(progress.next)
                .u64(progress.lines);
        }
        Ok(out.finish())
    }

    fn restore(&mut self, positions: &[&[u8]]) -> Result<()> {
        for position in positions {
            let mut input = StateReader::new(position, "a filesystem source position");
            if input.u64()? != POSITION_FORMAT {
                return Err(EddyError::Snapshot(format!(
                    "table '{}': the checkpoint's filesystem source position was written by \
                     an earlier Eddy (line numbers per file), which this one cannot continue; \
                     start the job without that checkpoint",
                    self.context.table
                )));
            }
            for _ in 0..input.count(40)? {
                let name = String::from_utf8_lossy(input.bytes()?).into_owned();
                let start = input.u64()?;
                let progress = SplitProgress {
                    end: input.u64()?,
                    next: input.u64()?,
                    lines: input.u64()?,
                };
                self.restored.insert((name, start), progress);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    use arrow::record_batch::RecordBatch;
    use object_store::buffered::BufWriter;

    fn split(file: &str, start: u64, end: u64, chunk: usize) -> OpenSplit {
        let from = start.saturating_sub(1) as usize;
        let chunks: Vec<object_store::Result<Bytes>> = file.as_bytes()[from..]
            .chunks(chunk)
            .map(|c| Ok(Bytes::copy_from_slice(c)))
            .collect();
        OpenSplit {
            name: "f".into(),
            split: FileSplit {
                path: Path::from("f"),
                start,
                end,
                file: FileFacts::default(),
            },
            progress: SplitProgress {
                end,
                next: start,
                lines: 0,
            },
            body: SplitBody::Lines(LineBuffer {
                stream: Some(futures::stream::iter(chunks).boxed()),
                pending: Vec::new(),
                pending_lines: 0,
                skip_partial: start > 0,
                skipped_to: from as u64,
            }),
        }
    }

    async fn batches(mut split: OpenSplit, max_lines: usize) -> Vec<String> {
        let mut out = Vec::new();
        while let Some((lines, count)) = fill_lines(&mut split, max_lines).await.unwrap() {
            let text = String::from_utf8(lines).unwrap();
            assert_eq!(text.matches('\n').count(), count, "{text:?}");
            out.push(text);
        }
        out
    }

    #[tokio::test]
    async fn lines_come_in_batches_across_chunk_boundaries() {
        let file = "1\n2\n3\n4\n5\n6";
        for chunk in [1, 3, 100] {
            assert_eq!(
                batches(split(file, 0, 11, chunk), 2).await,
                vec!["1\n2\n", "3\n4\n", "5\n6\n"]
            );
            assert_eq!(
                batches(split(file, 0, 11, chunk), 10).await,
                vec!["1\n2\n3\n4\n5\n6\n"]
            );
        }
    }

    /// Every way of cutting a file into splits returns each line exactly once.
    #[tokio::test]
    async fn splits_own_each_line_once() {
        let file = "alpha\nb\n\ncharlie,delta\ne\nfoxtrot";
        let expected: Vec<&str> = file.split('\n').collect();
        for split_size in 1..=file.len() as u64 + 1 {
            for chunk in [1, 2, 7, 100] {
                let mut lines = Vec::new();
                for (start, end) in cut(file.len() as u64, split_size) {
                    for batch in batches(split(file, start, end, chunk), 2).await {
                        lines.extend(batch.lines().map(str::to_string));
                    }
                }
                assert_eq!(lines, expected, "split size {split_size}, chunk {chunk}");
            }
        }
    }

    #[tokio::test]
    async fn a_split_ending_inside_a_line_finishes_it() {
        let file = "aaaa\nbbbb\ncccc\n";
        // 0..7 owns the lines starting at 0 and 5; 7..15 owns the one at 10.
        assert_eq!(
            batches(split(file, 0, 7, 3), 10).await,
            vec!["aaaa\nbbbb\n"]
        );
        assert_eq!(batches(split(file, 7, 15, 3), 10).await, vec!["cccc\n"]);
        // A split starting right after a line end owns the line starting there.
        assert_eq!(
            batches(split(file, 5, 15, 4), 1).await,
            vec!["bbbb\n", "cccc\n"]
        );
    }

    /// The ids (first column) of the rows an event carries.
    fn ids_of(event: SourceEvent) -> Vec<i64> {
        match event {
            SourceEvent::Rows { rows, .. } => {
                let column = rows.rows().column(0).as_any();
                let column = column.downcast_ref::<arrow::array::Int64Array>().unwrap();
                column.values().to_vec()
            }
            _ => Vec::new(),
        }
    }

    /// Reads the rest of `reader`; returns the ids read.
    async fn read_ids(reader: &mut Box<dyn SourceReader>) -> Vec<i64> {
        let mut ids = Vec::new();
        while let Some(event) = reader.next().await.unwrap() {
            ids.extend(ids_of(event));
        }
        ids
    }

    /// Three files in 100-byte splits; two subtasks read part of their splits, checkpoint,
    /// and three subtasks of a new run continue from those positions: every line once.
    #[tokio::test]
    async fn positions_continue_mid_split_at_another_parallelism() {
        let dir = std::env::temp_dir().join(format!("eddy-file-source-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let mut all: Vec<i64> = Vec::new();
        for (file, ids) in [("a.csv", 0..300), ("b.csv", 300..310), ("c.csv", 310..1000)] {
            let text: String = ids.clone().map(|i| format!("{i},row {i}\n")).collect();
            std::fs::write(dir.join(file), text).unwrap();
            all.extend(ids);
        }
        let csv = FileFormat::Lines(crate::format::Format::Csv(Default::default()));
        assert_positions_continue(&dir, csv, all).await;
    }

    /// The same with Parquet files of 40-row groups (and one file without rows): positions
    /// taken inside row groups continue there.
    #[tokio::test]
    async fn parquet_positions_continue_mid_row_group_at_another_parallelism() {
        use crate::filesystem::parquet::{ParquetFormat, ParquetPart};
        let dir = std::env::temp_dir().join(format!("eddy-parquet-source-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let location = eddy_common::object_storage::resolve(dir.to_str().unwrap(), &[]).unwrap();
        let values = [("parquet.block.size".to_string(), "1b".to_string())].into();
        let options =
            crate::Options::validate("t", "filesystem", &values, &["parquet.block.size"], &[]);
        let format = ParquetFormat::from_options(&options.unwrap()).unwrap();
        let schema = id_and_note();
        let mut all: Vec<i64> = Vec::new();
        for (file, ids) in [
            ("a", 0..300),
            ("b", 300..300),
            ("c", 300..310),
            ("d", 310..1000),
        ] {
            let path = location
                .path
                .clone()
                .join(format!("{file}.parquet").as_str());
            let upload = BufWriter::new(location.store.clone(), path);
            let mut part = ParquetPart::new(&format, upload, schema.clone()).unwrap();
            let ids: Vec<i64> = ids.collect();
            for group in ids.chunks(40) {
                let notes: Vec<String> = group.iter().map(|i| format!("row {i}")).collect();
                let columns: Vec<arrow::array::ArrayRef> = vec![
                    Arc::new(arrow::array::Int64Array::from(group.to_vec())),
                    Arc::new(arrow::array::StringArray::from(notes)),
                ];
                let batch = RecordBatch::try_new(schema.clone(), columns).unwrap();
                part.write(&batch).await.unwrap();
            }
            part.close().await.unwrap();
            all.extend(ids);
        }
        assert_positions_continue(&dir, FileFormat::Parquet(format), all).await;
    }

    fn id_and_note() -> SchemaRef {
        Arc::new(arrow::datatypes::Schema::new(vec![
            arrow::datatypes::Field::new("id", arrow::datatypes::DataType::Int64, false),
            arrow::datatypes::Field::new("note", arrow::datatypes::DataType::Utf8, false),
        ]))
    }

    /// Two subtasks read part of the files of `dir` (in 100-byte splits if they have
    /// lines), checkpoint, and three subtasks of a new run continue from those positions:
    /// every id of `all` is read once. Removes `dir`.
    async fn assert_positions_continue(dir: &std::path::Path, format: FileFormat, all: Vec<i64>) {
        let schema = id_and_note();
        let config = FileSourceConfig {
            location: eddy_common::object_storage::resolve(dir.to_str().unwrap(), &[]).unwrap(),
            format,
            ignore_parse_errors: false,
            split_size: 100,
            schema: schema.clone(),
            partitions: None,
        };
        let context = |subtask, parallelism| SourceContext {
            table: "t".into(),
            schema: schema.clone(),
            subtask,
            parallelism,
            batch_size: 7,
            metrics: Default::default(),
            completed: None,
            metadata: Vec::new(),
            columns_used: None,
            bounds: Vec::new(),
        };
        let mut seen = Vec::new();
        let mut positions = Vec::new();
        for subtask in 0..2 {
            let mut reader = create(&config, &context(subtask, 2)).unwrap();
            reader.open().await.unwrap();
            for _ in 0..(10 + 7 * subtask) {
                if let Some(event) = reader.next().await.unwrap() {
                    seen.extend(ids_of(event));
                }
            }
            positions.push(reader.position(0).unwrap());
        }
        let refs: Vec<&[u8]> = positions.iter().map(Vec::as_slice).collect();
        for subtask in 0..3 {
            let mut reader = create(&config, &context(subtask, 3)).unwrap();
            reader.restore(&refs).unwrap();
            reader.open().await.unwrap();
            seen.extend(read_ids(&mut reader).await);
        }
        seen.sort_unstable();
        assert_eq!(seen, all);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn files_are_cut_into_ranges() {
        assert_eq!(cut(10, 4), vec![(0, 4), (4, 8), (8, 10)]);
        assert_eq!(cut(8, 4), vec![(0, 4), (4, 8)]);
        assert_eq!(cut(0, 4), vec![(0, 0)]);
    }
}
