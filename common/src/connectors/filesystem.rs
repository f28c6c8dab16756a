//! `'connector' = 'filesystem'`: reads and writes CSV or JSON files in a local directory
//! or on S3. A subtask reading several files interleaves them and keeps a watermark per
//! file, so reading one file after another never turns rows late.

use std::collections::{BTreeMap, HashMap};

use arrow::datatypes::SchemaRef;
use bytes::Bytes;
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::{FutureExt, StreamExt, TryStreamExt};
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};

use super::file_sink::{self, FileSinkConfig};
use super::format::{FORMAT_KEYS, Format, LinePosition};
use super::{
    Options, SinkContext, SinkWriter, SourceContext, SourceEvent, SourceReader, TableConnector,
};
use crate::state::{StateReader, StateWriter};
use crate::storage::{StorageLocation, resolve};
use crate::{EddyError, Result};

const KEYS: &[&str] = &[
    "path",
    "sink.rolling-policy.file-size",
    "sink.rolling-policy.rollover-interval",
    "sink.delivery-guarantee",
];
const S3_PREFIX: &str = "s3.";

/// Configuration of a filesystem table.
#[derive(Debug)]
pub struct FilesystemConnector {
    location: StorageLocation,
    format: Format,
    ignore_parse_errors: bool,
    sink: FileSinkConfig,
    schema: SchemaRef,
}

impl FilesystemConnector {
    /// Validates the options and resolves the path (no I/O yet).
    pub fn new(table: &str, values: &BTreeMap<String, String>, schema: &SchemaRef) -> Result<Self> {
        let mut keys = KEYS.to_vec();
        keys.extend_from_slice(FORMAT_KEYS);
        let options = Options::validate(table, "filesystem", values, &keys, &[S3_PREFIX])?;
        let (format, ignore_parse_errors) = Format::from_options(&options)?;
        let s3: Vec<(&str, &str)> = values
            .iter()
            .filter_map(|(k, v)| k.strip_prefix(S3_PREFIX).map(|k| (k, v.as_str())))
            .collect();
        let location =
            resolve(options.required("path")?, &s3).map_err(|e| options.error(e.to_string()))?;
        let sink = FileSinkConfig {
            location: location.clone(),
            format,
            rolling_file_size: options
                .parse_or("sink.rolling-policy.file-size", 128 * 1024 * 1024)?,
            rollover_interval: options.duration_opt("sink.rolling-policy.rollover-interval")?,
            guarantee: options.delivery_guarantee()?,
        };
        Ok(FilesystemConnector {
            location,
            format,
            ignore_parse_errors,
            sink,
            schema: schema.clone(),
        })
    }
}

impl TableConnector for FilesystemConnector {
    fn name(&self) -> &'static str {
        "filesystem"
    }

    fn is_source(&self) -> bool {
        true
    }

    fn is_sink(&self) -> bool {
        true
    }

    fn create_reader(&self, context: &SourceContext) -> Result<Box<dyn SourceReader>> {
        Ok(Box::new(FileReader {
            location: self.location.clone(),
            format: self.format,
            ignore_parse_errors: self.ignore_parse_errors,
            schema: self.schema.clone(),
            context: context.clone(),
            files: None,
            cursor: 0,
            finished: Vec::new(),
            restored: HashMap::new(),
        }))
    }

    fn create_writer(&self, context: &SinkContext) -> Result<Box<dyn SinkWriter>> {
        file_sink::create(&self.sink, context)
    }
}

/// The bytes of an object, as they arrive.
type SyncStream = BoxStream<'static, object_store::Result<Bytes>>;

/// One file being read.
struct OpenFile {
    name: String,
    split: usize,
    stream: Option<SyncStream>,
    /// Bytes read and not yet taken as lines.
    pending: Vec<u8>,
    /// How many line ends `pending` holds (kept as bytes come and go, so that no read
    /// scans the whole buffer again).
    pending_lines: usize,
    next_line: u64,
    /// Lines to drop before reading (already read before a restore).
    skip_lines: u64,
}

struct FileReader {
    location: StorageLocation,
    format: Format,
    ignore_parse_errors: bool,
    schema: SchemaRef,
    context: SourceContext,
    files: Option<Vec<OpenFile>>,
    cursor: usize,
    /// Files read to their end.
    finished: Vec<String>,
    /// Positions of an earlier run, by file: the next line, or `None` when it was finished.
    restored: HashMap<String, Option<u64>>,
}

impl FileReader {
    /// The files this subtask reads: every visible file under the path, sorted, dealt
    /// round-robin over the subtasks.
    async fn assigned_files(
        location: &StorageLocation,
        context: &SourceContext,
    ) -> Result<Vec<Path>> {
        let store = &location.store;
        let path = &location.path;
        if let Ok(meta) = store.head(path).await {
            return Ok(if context.subtask == 0 {
                vec![meta.location]
            } else {
                vec![]
            });
        }
        let mut all: Vec<Path> = store
            .list(Some(path))
            .map_ok(|meta| meta.location)
            .try_collect()
            .await?;
        all.retain(|p| {
            p.filename()
                .is_some_and(|name| !name.starts_with('.') && !name.starts_with('_'))
        });
        if all.is_empty() {
            return Err(EddyError::Connector {
                table: context.table.clone(),
                message: format!("no files at '{}'", location.display),
            });
        }
        all.sort();
        Ok(all
            .into_iter()
            .enumerate()
            .filter(|(i, _)| i % context.parallelism == context.subtask)
            .map(|(_, p)| p)
            .collect())
    }

    async fn open_files(&mut self) -> Result<usize> {
        let mut files = Vec::new();
        let assigned = Self::assigned_files(&self.location, &self.context).await?;
        for path in assigned {
            let name = self.location.show(&path);
            let next_line = match self.restored.get(&name) {
                Some(None) => {
                    self.finished.push(name);
                    continue;
                }
                Some(Some(line)) => *line,
                None => 1,
            };
            let stream = self.location.store.get(&path).await?.into_stream();
            files.push(OpenFile {
                name,
                split: files.len(),
                stream: Some(stream),
                pending: Vec::new(),
                pending_lines: 0,
                next_line,
                skip_lines: next_line - 1,
            });
        }
        let count = files.len();
        self.files = Some(files);
        Ok(count)
    }

    async fn next_rows(&mut self) -> Result<Option<SourceEvent>> {
        let Some(files) = self.files.as_mut() else {
            return Err(EddyError::Runtime(
                "filesystem reader used before open".into(),
            ));
        };
        loop {
            if files.is_empty() {
                return Ok(None);
            }
            self.cursor %= files.len();
            let file = &mut files[self.cursor];
            let lines = fill_lines(file, self.context.batch_size).await?;
            let Some(lines) = lines else {
                let split = file.split;
                let done = files.remove(self.cursor);
                self.finished.push(done.name);
                return Ok(Some(SourceEvent::SplitEnd(split)));
            };
            self.cursor += 1;
            let first_line = file.next_line;
            file.next_line += lines.iter().filter(|b| **b == b'\n').count() as u64;
            let position = LinePosition {
                file: &file.name,
                first_line,
            };
            let decoded = self.format.decode(
                &self.schema,
                &lines,
                position,
                self.ignore_parse_errors,
                &self.context.metrics,
            )?;
            if let Some(rows) = decoded {
                return Ok(Some(SourceEvent::Rows {
                    split: file.split,
                    rows,
                }));
            }
        }
    }
}

/// Reads from the file until it holds `max_lines` complete lines (or the file ends), and
/// takes those lines out; `None` when the file is exhausted.
async fn fill_lines(file: &mut OpenFile, max_lines: usize) -> Result<Option<Vec<u8>>> {
    loop {
        if file.skip_lines > 0 && file.pending_lines > 0 {
            let skip = file.skip_lines.min(file.pending_lines as u64) as usize;
            let cut = end_of_line(&file.pending, skip);
            file.pending.drain(..cut);
            file.pending_lines -= skip;
            file.skip_lines -= skip as u64;
        }
        if file.skip_lines == 0 && (file.pending_lines >= max_lines || file.stream.is_none()) {
            break;
        }
        if file.stream.is_none() {
            // The file ended within the lines to skip.
            file.pending.clear();
            file.pending_lines = 0;
            file.skip_lines = 0;
            break;
        }
        let stream = file.stream.as_mut().expect("stream open");
        match stream.next().await {
            Some(bytes) => {
                let bytes = bytes?;
                file.pending_lines += bytes.iter().filter(|b| **b == b'\n').count();
                file.pending.extend_from_slice(&bytes);
            }
            None => file.stream = None,
        }
    }
    if file.pending.is_empty() {
        return Ok(None);
    }
    // Up to `max_lines` complete lines; once the file has ended, everything left.
    let (cut, taken) = match file.stream {
        None => (file.pending.len(), file.pending_lines),
        Some(_) => {
            let taken = max_lines.min(file.pending_lines);
            (end_of_line(&file.pending, taken), taken)
        }
    };
    let rest = file.pending.split_off(cut);
    let mut lines = std::mem::replace(&mut file.pending, rest);
    file.pending_lines -= taken;
    if lines.last() != Some(&b'\n') {
        lines.push(b'\n');
    }
    Ok(Some(lines))
}

/// The offset just past the `count`-th line end of `bytes` (0 for none).
fn end_of_line(bytes: &[u8], count: usize) -> usize {
    if count == 0 {
        return 0;
    }
    bytes
        .iter()
        .enumerate()
        .filter(|(_, b)| **b == b'\n')
        .nth(count - 1)
        .map_or(bytes.len(), |(i, _)| i + 1)
}

impl SourceReader for FileReader {
    fn open(&mut self) -> BoxFuture<'_, Result<usize>> {
        self.open_files().boxed()
    }

    fn next(&mut self) -> BoxFuture<'_, Result<Option<SourceEvent>>> {
        self.next_rows().boxed()
    }

    fn position(&self) -> Result<Vec<u8>> {
        let open = self.files.iter().flatten();
        let mut out = StateWriter::new();
        out.u64((self.finished.len() + open.clone().count()) as u64);
        for name in &self.finished {
            out.bytes(name.as_bytes()).u64(0);
        }
        for file in open {
            out.bytes(file.name.as_bytes()).u64(file.next_line);
        }
        Ok(out.finish())
    }

    fn restore(&mut self, positions: &[&[u8]]) -> Result<()> {
        for position in positions {
            let mut input = StateReader::new(position, "a filesystem source position");
            for _ in 0..input.count(16)? {
                let name = String::from_utf8_lossy(input.bytes()?).into_owned();
                let line = input.u64()?;
                self.restored.insert(name, (line > 0).then_some(line));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(chunks: &[&str], skip_lines: u64) -> OpenFile {
        let chunks: Vec<object_store::Result<Bytes>> = chunks
            .iter()
            .map(|c| Ok(Bytes::from(c.to_string())))
            .collect();
        OpenFile {
            name: "f".into(),
            split: 0,
            stream: Some(futures::stream::iter(chunks).boxed()),
            pending: Vec::new(),
            pending_lines: 0,
            next_line: skip_lines + 1,
            skip_lines,
        }
    }

    async fn batches(mut file: OpenFile, max_lines: usize) -> Vec<String> {
        let mut out = Vec::new();
        while let Some(lines) = fill_lines(&mut file, max_lines).await.unwrap() {
            out.push(String::from_utf8(lines).unwrap());
        }
        out
    }

    #[tokio::test]
    async fn lines_come_in_batches_across_chunk_boundaries() {
        let chunks = ["1\n2", "\n3\n4\n", "5\n6"];
        assert_eq!(
            batches(file(&chunks, 0), 2).await,
            vec!["1\n2\n", "3\n4\n", "5\n6\n"]
        );
        assert_eq!(
            batches(file(&chunks, 0), 10).await,
            vec!["1\n2\n3\n4\n5\n6\n"]
        );
    }

    #[tokio::test]
    async fn a_restored_reader_skips_the_lines_read_before() {
        let chunks = ["1\n2", "\n3\n4\n", "5\n6"];
        assert_eq!(batches(file(&chunks, 3), 2).await, vec!["4\n5\n", "6\n"]);
        assert_eq!(batches(file(&chunks, 6), 2).await, Vec::<String>::new());
        assert_eq!(batches(file(&chunks, 9), 2).await, Vec::<String>::new());
    }
}
