//! The Iceberg sink's subtasks: a [`TransactionWriter`] writing Parquet data files, and a
//! [`TransactionCommitter`] committing each prepared set of files as one snapshot.
//!
//! A transaction is named `{job}-{attempt token}-{subtask}-t{n}` and its data and delete
//! files `data/{transaction}-{k}.parquet`, the manifests its commit adds
//! `metadata/{transaction}-{snapshot id}-m0.avro` (data files) and `-m1.avro` (delete
//! files). A commit first looks for its name in
//! the summaries of the table's snapshots and among the current snapshot's manifests:
//! found, it was committed before (a replay after a failure) and is skipped; the manifest
//! outlives an expired snapshot, until a rewrite of the table's manifests merges it. A
//! restarted subtask deletes the data files earlier attempts wrote for transactions that
//! were neither committed nor recorded in the restored checkpoint; once snapshots have
//! expired, files written before the oldest snapshot still in the table's metadata are
//! left, since their commit may have expired with them (Iceberg's orphan-file removal
//! deletes them).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use arrow::array::{Int64Array, RecordBatch, StringArray, UInt32Array};
use arrow::compute::take_record_batch;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::row::{RowConverter, SortField};
use eddy_common::chunk::{Chunk, Op};
use eddy_common::event::wall_clock;
use eddy_common::state::{StateReader, StateWriter};
use eddy_common::{EddyError, Result};
use futures::FutureExt;
use futures::future::BoxFuture;
use object_store::ObjectStoreExt;
use object_store::buffered::BufWriter;
use object_store::path::Path;
use serde_json::{Value as Json, json};

use super::IcebergError;
use super::avro::Value;
use super::delta::{InsertedRows, RowPosition};
use super::manifest::{
    AddedManifest, Content, DataFile, ManifestList, read_manifest_list, write_manifest,
};
use super::metadata::{CHECKPOINT, JOB_ID, TRANSACTION, TableMetadata};
use super::partition::{self, PartitionValue};
use super::stats::{ColumnStats, column_stats};
use super::table::{EqualityFields, IcebergTable, TableFiles};
use crate::filesystem::{ParquetFormat, ParquetPart};
use crate::transaction::{
    AttemptToken, TransactionCommitter, TransactionWriter, TwoPhaseCommitSink,
};
use crate::{SinkContext, SinkWriter};

/// Commits that lose the catalog's compare-and-set to other writers are tried again this
/// many times before the commit fails (and is retried as a transient failure).
const CONFLICT_ATTEMPTS: u32 = 20;

/// The least time between two listings of the data files for leftovers.
const SWEEP_INTERVAL: Duration = Duration::from_secs(10);

/// How a sink subtask writes its files.
pub struct Writing {
    /// The Parquet writer's settings.
    pub parquet: ParquetFormat,
    /// Data files roll at this size.
    pub target_file_size: u64,
    /// `write.upsert.enabled`: an insert deletes the row of its key first, and `-U` rows
    /// are skipped (the `+U` after them deletes).
    pub upsert: bool,
}

/// The writer and committer of one sink subtask.
pub fn create(
    table: Arc<IcebergTable>,
    writing: Writing,
    context: &SinkContext,
) -> Result<Box<dyn SinkWriter>> {
    let token = AttemptToken::new(context.execution.attempt);
    let job = context.execution.job.clone();
    let writer = DataFileWriter {
        table: table.clone(),
        writing,
        prefix: format!("{job}-{token}-{}", context.subtask),
        transactions: 0,
        locations: Vec::new(),
        data: HashMap::new(),
        equality_deletes: HashMap::new(),
        inserted: InsertedRows::default(),
        position_deletes: Vec::new(),
        closed: Vec::new(),
    };
    let committer = SnapshotCommitter {
        table,
        job,
        token,
        subtask: context.subtask,
        parallelism: context.parallelism.max(1),
        last_sweep: Default::default(),
    };
    Ok(Box::new(TwoPhaseCommitSink::new(
        context,
        Box::new(writer),
        Arc::new(committer),
    )?))
}

/// A file of the open transaction: where it is, and its rows' partition tuple.
struct FileOfTransaction {
    location: String,
    /// The tuple in the row format (equal tuples have equal keys).
    tuple_key: Vec<u8>,
    /// The tuple's values.
    values: Vec<PartitionValue>,
}

/// A data or equality delete file being written.
struct OpenFile {
    /// Its number in the transaction (the index of its location).
    number: u32,
    content: Content,
    schema: SchemaRef,
    part: ParquetPart,
    path: Path,
    rows: i64,
}

/// Writes the sink's rows into Parquet data files, a set of them per transaction, each
/// file of one partition tuple; into a table with a primary key, also the deletes of its
/// updates and deletes: by position for rows of the same transaction, by the key's values
/// (equality deletes) for rows committed before.
struct DataFileWriter {
    table: Arc<IcebergTable>,
    writing: Writing,
    /// `{job}-{token}-{subtask}`: the start of this writer's transaction names.
    prefix: String,
    /// Transactions prepared so far.
    transactions: u64,
    /// The files of the open transaction, by number.
    locations: Vec<FileOfTransaction>,
    /// The data file being written of each partition tuple (by its key).
    data: HashMap<Vec<u8>, OpenFile>,
    /// The equality delete file being written of each partition tuple.
    equality_deletes: HashMap<Vec<u8>, OpenFile>,
    /// The rows the open transaction wrote, by key (tables with a primary key).
    inserted: InsertedRows,
    /// Rows of the open transaction's data files deleted again.
    position_deletes: Vec<RowPosition>,
    /// The files of the open transaction that are complete.
    closed: Vec<DataFile>,
}

impl DataFileWriter {
    fn transaction(&self) -> String {
        format!("{}-t{}", self.prefix, self.transactions)
    }

    async fn write_chunk(&mut self, chunk: &Chunk) -> Result<()> {
        let table = self.table.clone();
        let files = table.files().await?;
        let rows = files.conform(chunk.rows())?;
        match &files.equality {
            Some(equality) => self.write_changes(files, equality, chunk, rows).await,
            None if chunk.is_append_only() => {
                for part in files.spec.split(rows)? {
                    self.write_data(files, &part.key, &part.values, &part.rows)
                        .await?;
                }
                Ok(())
            }
            None => Err(EddyError::Unsupported(format!(
                "table '{}': updates and deletes into an Iceberg table without a PRIMARY KEY \
                 (its columns are the equality fields of the deletes)",
                self.table.name
            ))),
        }
    }

    /// Writes a changelog into a table with equality fields: each retraction deletes the
    /// row of its key (by position when this transaction wrote it), each insert or
    /// update writes its row, and deletes the row of its key first in upsert mode.
    async fn write_changes(
        &mut self,
        files: &TableFiles,
        equality: &EqualityFields,
        chunk: &Chunk,
        rows: RecordBatch,
    ) -> Result<()> {
        let tuples = files.spec.assign(&rows)?;
        let key_columns = rows.project(&equality.columns)?;
        let keys = RowConverter::new(
            key_columns
                .schema()
                .fields()
                .iter()
                .map(|f| SortField::new(f.data_type().clone()))
                .collect(),
        )?
        .convert_columns(key_columns.columns())?;
        let mut inserts = vec![Vec::<u32>::new(); tuples.tuples.len()];
        let mut deletes = vec![Vec::<u32>::new(); tuples.tuples.len()];
        for row in 0..rows.num_rows() {
            let op = chunk.op(row);
            let tuple = tuples.of_row[row] as usize;
            let key = keys.row(row);
            // An update's new row replaces the key's row: in an upsert stream no `-U`
            // came before it. An insert does only in upsert mode; then `-U` rows are
            // skipped, since the `+U` after them deletes.
            let delete = match op {
                Op::Insert => self.writing.upsert,
                Op::UpdateBefore => !self.writing.upsert,
                Op::UpdateAfter | Op::Delete => true,
            };
            if delete {
                match self.inserted.remove(key.as_ref()) {
                    Some(at) => self.position_deletes.push(at),
                    None => deletes[tuple].push(row as u32),
                }
            }
            if op.is_accumulate() {
                let (tuple_key, values) = &tuples.tuples[tuple];
                let file = self.file_of(files, Content::Data, tuple_key, values)?;
                let at = RowPosition {
                    file: file.number,
                    pos: file.rows + inserts[tuple].len() as i64,
                };
                if let Some(earlier) = self.inserted.insert(key.as_ref(), at) {
                    self.position_deletes.push(earlier);
                }
                inserts[tuple].push(row as u32);
            }
        }
        let key_rows =
            RecordBatch::try_new(equality.schema.clone(), key_columns.columns().to_vec())?;
        for ((tuple_key, values), (inserts, deletes)) in
            tuples.tuples.iter().zip(inserts.into_iter().zip(deletes))
        {
            if !inserts.is_empty() {
                let taken = take_record_batch(&rows, &UInt32Array::from(inserts))?;
                self.write_data(files, tuple_key, values, &taken).await?;
            }
            if !deletes.is_empty() {
                let taken = take_record_batch(&key_rows, &UInt32Array::from(deletes))?;
                let file = self.file_of(files, Content::EqualityDeletes, tuple_key, values)?;
                file.part.write(&taken).await?;
                file.rows += taken.num_rows() as i64;
            }
        }
        Ok(())
    }

    /// The data file (or equality delete file) being written of a partition tuple,
    /// started when there is none.
    fn file_of(
        &mut self,
        files: &TableFiles,
        content: Content,
        tuple_key: &[u8],
        values: &[PartitionValue],
    ) -> Result<&mut OpenFile> {
        if !self.open_files(content).contains_key(tuple_key) {
            let schema = match (&content, &files.equality) {
                (Content::EqualityDeletes, Some(equality)) => equality.schema.clone(),
                _ => files.file_schema.clone(),
            };
            let file = self.open_file(files, content, tuple_key, values, schema)?;
            self.open_files(content).insert(tuple_key.to_vec(), file);
        }
        Ok(self
            .open_files(content)
            .get_mut(tuple_key)
            .expect("a file is open"))
    }

    /// Every file being written, no longer open.
    fn take_open_files(&mut self) -> Vec<OpenFile> {
        let data = self.data.drain().map(|(_, file)| file);
        data.chain(self.equality_deletes.drain().map(|(_, file)| file))
            .collect()
    }

    /// The files being written of a content, by partition tuple.
    fn open_files(&mut self, content: Content) -> &mut HashMap<Vec<u8>, OpenFile> {
        match content {
            Content::EqualityDeletes => &mut self.equality_deletes,
            _ => &mut self.data,
        }
    }

    /// Writes rows of one partition tuple into its data file, which rolls once it is
    /// as large as the target size.
    async fn write_data(
        &mut self,
        files: &TableFiles,
        tuple_key: &[u8],
        values: &[PartitionValue],
        rows: &RecordBatch,
    ) -> Result<()> {
        let open = self.file_of(files, Content::Data, tuple_key, values)?;
        open.part.write(rows).await?;
        open.rows += rows.num_rows() as i64;
        if open.part.bytes() >= self.writing.target_file_size {
            let full = self.data.remove(tuple_key).expect("a data file is open");
            self.close_file(full).await?;
        }
        Ok(())
    }

    /// Starts the transaction's next file, of rows of one partition tuple.
    fn open_file(
        &mut self,
        files: &TableFiles,
        content: Content,
        tuple_key: &[u8],
        values: &[PartitionValue],
        schema: SchemaRef,
    ) -> Result<OpenFile> {
        let number = self.locations.len() as u32;
        let location = format!(
            "{}/data/{}-{number}.parquet",
            files.base,
            self.transaction()
        );
        let path = files.path(&location).map_err(|e| self.table.error(e))?;
        let upload = BufWriter::new(files.store.store.clone(), path.clone());
        let part = ParquetPart::new(&self.writing.parquet, upload, schema.clone())?;
        self.locations.push(FileOfTransaction {
            location,
            tuple_key: tuple_key.to_vec(),
            values: values.to_vec(),
        });
        Ok(OpenFile {
            number,
            content,
            schema,
            part,
            path,
            rows: 0,
        })
    }

    async fn close_file(&mut self, open: OpenFile) -> Result<()> {
        let footer = open.part.close().await?;
        let files = self.table.files().await?;
        let equality_ids = match (&open.content, &files.equality) {
            (Content::EqualityDeletes, Some(equality)) => equality.ids.clone(),
            _ => Vec::new(),
        };
        let size = files.store.store.head(&open.path).await?.size;
        let file = &self.locations[open.number as usize];
        self.closed.push(DataFile {
            content: open.content,
            path: file.location.clone(),
            record_count: open.rows,
            size: size as i64,
            stats: column_stats(&footer, &open.schema),
            partition: file.values.clone(),
            equality_ids,
        });
        Ok(())
    }

    /// Closes every open file and writes the position deletes: the transaction's files
    /// are complete.
    async fn close_all(&mut self) -> Result<()> {
        for file in self.take_open_files() {
            self.close_file(file).await?;
        }
        self.write_position_deletes().await?;
        self.inserted.clear();
        Ok(())
    }

    /// Writes the rows deleted by position into a position delete file per partition
    /// tuple, sorted by file and position (as the spec requires).
    async fn write_position_deletes(&mut self) -> Result<()> {
        if self.position_deletes.is_empty() {
            return Ok(());
        }
        let mut deleted = std::mem::take(&mut self.position_deletes);
        let locations = &self.locations;
        deleted.sort_unstable_by(|a, b| {
            let path = |at: &RowPosition| &locations[at.file as usize].location;
            (path(a), a.pos).cmp(&(path(b), b.pos))
        });
        let mut by_tuple: HashMap<Vec<u8>, (Vec<PartitionValue>, Vec<RowPosition>)> =
            HashMap::new();
        for at in deleted {
            let file = &self.locations[at.file as usize];
            by_tuple
                .entry(file.tuple_key.clone())
                .or_insert_with(|| (file.values.clone(), Vec::new()))
                .1
                .push(at);
        }
        let table = self.table.clone();
        let files = table.files().await?;
        for (key, (values, positions)) in by_tuple {
            let paths = StringArray::from_iter_values(
                positions
                    .iter()
                    .map(|at| self.locations[at.file as usize].location.as_str()),
            );
            let pos = Int64Array::from_iter_values(positions.iter().map(|at| at.pos));
            let schema = position_delete_schema();
            let batch = RecordBatch::try_new(schema.clone(), vec![Arc::new(paths), Arc::new(pos)])?;
            let mut file =
                self.open_file(files, Content::PositionDeletes, &key, &values, schema)?;
            file.part.write(&batch).await?;
            file.rows = batch.num_rows() as i64;
            self.close_file(file).await?;
        }
        Ok(())
    }
}

/// The schema of position delete files: `file_path` and `pos`, with the spec's reserved
/// field ids.
fn position_delete_schema() -> SchemaRef {
    let field = |name: &str, data_type, id: &str| {
        Field::new(name, data_type, false)
            .with_metadata([("PARQUET:field_id".to_string(), id.to_string())].into())
    };
    Arc::new(Schema::new(vec![
        field("file_path", DataType::Utf8, "2147483546"),
        field("pos", DataType::Int64, "2147483545"),
    ]))
}

impl TransactionWriter for DataFileWriter {
    fn write<'a>(&'a mut self, chunk: &'a Chunk) -> BoxFuture<'a, Result<()>> {
        self.write_chunk(chunk).boxed()
    }

    fn prepare(&mut self, checkpoint: u64) -> BoxFuture<'_, Result<Option<Vec<u8>>>> {
        async move {
            self.close_all().await?;
            let files = std::mem::take(&mut self.closed);
            let name = self.transaction();
            self.transactions += 1;
            self.locations.clear();
            if files.is_empty() {
                return Ok(None);
            }
            let transaction = Transaction {
                name,
                checkpoint,
                files,
            };
            Ok(Some(transaction.encode()))
        }
        .boxed()
    }

    fn abort(&mut self) -> BoxFuture<'_, Result<()>> {
        async move {
            for file in self.take_open_files() {
                file.part.abort().await?;
            }
            let closed = std::mem::take(&mut self.closed);
            if !closed.is_empty() {
                let files = self.table.files().await?;
                for file in closed {
                    let path = files.path(&file.path).map_err(|e| self.table.error(e))?;
                    delete_if_present(files, &path).await?;
                }
            }
            self.inserted.clear();
            self.position_deletes.clear();
            self.locations.clear();
            self.transactions += 1;
            Ok(())
        }
        .boxed()
    }
}

async fn delete_if_present(files: &TableFiles, path: &Path) -> Result<()> {
    match files.store.store.delete(path).await {
        Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// The manifests of the table's current snapshot (its manifest list's entries).
async fn live_manifests(
    files: &TableFiles,
    metadata: &TableMetadata,
) -> Result<Vec<Value>, IcebergError> {
    let list = metadata
        .current_snapshot()
        .and_then(|s| s.get("manifest-list"))
        .and_then(Json::as_str);
    match list {
        Some(list) => read_manifest_list(&files.get(list).await?, list),
        None => Ok(Vec::new()),
    }
}

/// Whether one of `manifests` (manifest list entries) is the one a commit of
/// `transaction` added.
fn holds_manifest_of(manifests: &[Value], transaction: &str) -> bool {
    manifests
        .iter()
        .any(|entry| added_by_transaction(entry).is_some_and(|t| t == transaction))
}

/// The transaction whose commit added a manifest (a manifest list entry), from its name
/// (`{transaction}-{snapshot id}-m0.avro` for data files, `-m1.avro` for deletes); `None`
/// for another writer's manifest.
fn added_by_transaction(entry: &Value) -> Option<String> {
    let Some(Value::String(path)) = entry.field("manifest_path") else {
        return None;
    };
    let name = path.rsplit('/').next()?;
    let name = name
        .strip_suffix("-m0.avro")
        .or_else(|| name.strip_suffix("-m1.avro"))?;
    let (transaction, snapshot) = name.rsplit_once('-')?;
    snapshot.parse::<i64>().ok()?;
    Some(transaction.to_string())
}

/// A prepared transaction: the data files one sink subtask wrote before a barrier.
#[derive(Debug, Clone, PartialEq)]
struct Transaction {
    name: String,
    checkpoint: u64,
    files: Vec<DataFile>,
}

impl Transaction {
    fn encode(&self) -> Vec<u8> {
        let mut out = StateWriter::new();
        out.bytes(self.name.as_bytes()).u64(self.checkpoint);
        out.u64(self.files.len() as u64);
        for file in &self.files {
            out.u64(file.content as u64)
                .bytes(file.path.as_bytes())
                .i64(file.record_count)
                .i64(file.size);
            let stats = &file.stats;
            for counts in [&stats.value_counts, &stats.null_counts] {
                out.u64(counts.len() as u64);
                for (id, count) in counts {
                    out.i64((*id).into()).i64(*count);
                }
            }
            for bounds in [&stats.lower_bounds, &stats.upper_bounds] {
                out.u64(bounds.len() as u64);
                for (id, bound) in bounds {
                    out.i64((*id).into()).bytes(bound);
                }
            }
            out.u64(file.partition.len() as u64);
            for value in &file.partition {
                let (tag, bytes) = partition::tagged(value);
                out.u64(tag.into()).bytes(&bytes);
            }
            out.u64(file.equality_ids.len() as u64);
            for id in &file.equality_ids {
                out.i64((*id).into());
            }
        }
        out.finish()
    }

    fn decode(handle: &[u8]) -> Result<Transaction> {
        let mut input = StateReader::new(handle, "an Iceberg sink's transaction");
        let text = |bytes: &[u8]| {
            String::from_utf8(bytes.to_vec())
                .map_err(|_| EddyError::Snapshot("an Iceberg transaction: not UTF-8".into()))
        };
        let name = text(input.bytes()?)?;
        let checkpoint = input.u64()?;
        let mut files = Vec::new();
        for _ in 0..input.count(4)? {
            let number = input.u64()?;
            let content = Content::from_number(number).ok_or_else(|| {
                EddyError::Snapshot(format!(
                    "an Iceberg transaction: a file of content {number}"
                ))
            })?;
            let path = text(input.bytes()?)?;
            let (record_count, size) = (input.i64()?, input.i64()?);
            let mut stats = ColumnStats::default();
            for counts in [&mut stats.value_counts, &mut stats.null_counts] {
                for _ in 0..input.count(2)? {
                    counts.push((input.i64()? as i32, input.i64()?));
                }
            }
            for bounds in [&mut stats.lower_bounds, &mut stats.upper_bounds] {
                for _ in 0..input.count(2)? {
                    bounds.push((input.i64()? as i32, input.bytes()?.to_vec()));
                }
            }
            let mut partition = Vec::new();
            for _ in 0..input.count(2)? {
                let (tag, bytes) = (input.u64()?, input.bytes()?);
                let value = u8::try_from(tag)
                    .ok()
                    .and_then(|tag| partition::from_tagged(tag, bytes))
                    .ok_or_else(|| {
                        EddyError::Snapshot(format!(
                            "an Iceberg transaction: a partition value of kind {tag} in {} bytes",
                            bytes.len()
                        ))
                    })?;
                partition.push(value);
            }
            let mut equality_ids = Vec::new();
            for _ in 0..input.count(1)? {
                equality_ids.push(input.i64()? as i32);
            }
            files.push(DataFile {
                content,
                path,
                record_count,
                size,
                stats,
                partition,
                equality_ids,
            });
        }
        Ok(Transaction {
            name,
            checkpoint,
            files,
        })
    }
}

/// Commits prepared transactions as snapshots, and deletes what earlier attempts left.
struct SnapshotCommitter {
    table: Arc<IcebergTable>,
    job: String,
    token: AttemptToken,
    subtask: usize,
    parallelism: usize,
    /// When the data files were last swept for leftovers.
    last_sweep: std::sync::Mutex<Option<std::time::Instant>>,
}

impl SnapshotCommitter {
    async fn commit_transaction(&self, transaction: &Transaction) -> Result<()> {
        let table = &self.table;
        let files = table.files().await?;
        for attempt in 0..CONFLICT_ATTEMPTS {
            let base = table.current().await?;
            let live = live_manifests(files, &base.metadata)
                .await
                .map_err(|e| table.error(e))?;
            // The snapshot summary names the transaction; once that snapshot has expired,
            // the manifest it added, named after the transaction, is still live.
            if base.metadata.has_transaction(&transaction.name)
                || holds_manifest_of(&live, &transaction.name)
            {
                tracing::info!(table = %table.name, transaction = %transaction.name, "Iceberg transaction already committed");
                return Ok(());
            }
            let (snapshot, written) = self
                .write_snapshot(files, &base.metadata, live, transaction)
                .await
                .map_err(|e| table.error(e))?;
            if table.commit(&base, snapshot).await? {
                return Ok(());
            }
            // Another writer committed first: the files of this try are unreferenced.
            for location in written {
                files.delete(&location).await;
            }
            tokio::time::sleep(Duration::from_millis(20 * u64::from(attempt + 1))).await;
        }
        Err(table.error(IcebergError::Conflict(format!(
            "{CONFLICT_ATTEMPTS} tries lost to concurrent commits"
        ))))
    }

    /// Writes the manifests (one of data files, one of delete files) and the manifest
    /// list of a snapshot adding the transaction's files on top of `metadata`, whose
    /// current snapshot's manifests are `inherited`; returns the snapshot (not yet
    /// committed) and the files written.
    async fn write_snapshot(
        &self,
        files: &TableFiles,
        metadata: &TableMetadata,
        inherited: Vec<Value>,
        transaction: &Transaction,
    ) -> Result<(Json, Vec<String>), IcebergError> {
        let snapshot_id = (uuid::Uuid::new_v4().as_u64_pair().0 & (i64::MAX as u64)) as i64;
        let sequence_number = metadata.next_sequence_number();
        let directory = format!("{}/metadata", files.base);
        let schema = metadata.schema_json()?;
        let (data, deletes): (Vec<DataFile>, Vec<DataFile>) = transaction
            .files
            .iter()
            .cloned()
            .partition(|f| f.content == Content::Data);
        let mut written = Vec::new();
        let mut added = Vec::new();
        for (number, files_of_kind) in [(0, &data), (1, &deletes)] {
            if files_of_kind.is_empty() {
                continue;
            }
            let path = format!(
                "{directory}/{}-{snapshot_id}-m{number}.avro",
                transaction.name
            );
            let bytes = write_manifest(files_of_kind, &files.spec, snapshot_id, &schema)?;
            let length = bytes.len() as i64;
            files.put(&path, bytes).await?;
            written.push(path.clone());
            added.push(AddedManifest {
                path,
                length,
                files: files_of_kind,
            });
        }
        let parent = metadata.current_snapshot();
        let parent_id = parent
            .and_then(|s| s.get("snapshot-id"))
            .and_then(Json::as_i64);
        let list = ManifestList {
            snapshot_id,
            parent_id,
            sequence_number,
            inherited,
            added,
            spec: &files.spec,
        };
        let manifest_list = format!(
            "{directory}/snap-{snapshot_id}-1-{}.avro",
            uuid::Uuid::new_v4()
        );
        files.put(&manifest_list, list.write()?).await?;
        written.push(manifest_list.clone());
        let snapshot = json!({
            "snapshot-id": snapshot_id,
            "parent-snapshot-id": parent_id,
            "sequence-number": sequence_number,
            "timestamp-ms": wall_clock(),
            "manifest-list": manifest_list,
            "summary": self.summary(parent, transaction),
            "schema-id": schema.0,
        });
        Ok((snapshot, written))
    }

    /// The snapshot's summary: what it added, the table's totals, and the transaction.
    fn summary(&self, parent: Option<&Json>, transaction: &Transaction) -> Json {
        // Files, rows and bytes added, by content.
        let (mut files, mut rows, mut bytes) = ([0i64; 3], [0i64; 3], [0i64; 3]);
        for file in &transaction.files {
            let content = file.content as usize;
            files[content] += 1;
            rows[content] += file.record_count;
            bytes[content] += file.size;
        }
        let data = Content::Data as usize;
        let (position, equality) = (
            Content::PositionDeletes as usize,
            Content::EqualityDeletes as usize,
        );
        let deletes = files[position] + files[equality];
        // (name, added, whether the summary keeps a total of it)
        let added = [
            ("data-files", files[data], true),
            ("records", rows[data], true),
            ("files-size", bytes[data], true),
            ("delete-files", deletes, true),
            ("position-deletes", rows[position], true),
            ("equality-deletes", rows[equality], true),
            ("position-delete-files", files[position], false),
            ("equality-delete-files", files[equality], false),
        ];
        let mut summary = serde_json::Map::new();
        let operation = if deletes == 0 { "append" } else { "overwrite" };
        summary.insert("operation".into(), json!(operation));
        for (name, value, totalled) in added {
            if value > 0 {
                summary.insert(format!("added-{name}"), json!(value.to_string()));
            }
            if !totalled {
                continue;
            }
            let total = match parent {
                None => Some(0),
                Some(parent) => parent
                    .pointer(&format!("/summary/total-{name}"))
                    .and_then(Json::as_str)
                    .and_then(|t| t.parse::<i64>().ok()),
            };
            if let Some(total) = total {
                summary.insert(format!("total-{name}"), json!((total + value).to_string()));
            }
        }
        summary.insert(JOB_ID.into(), json!(self.job));
        summary.insert(TRANSACTION.into(), json!(transaction.name));
        summary.insert(CHECKPOINT.into(), json!(transaction.checkpoint.to_string()));
        Json::Object(summary)
    }

    /// Whether a data file (`{job}-{token}-{subtask}-t{n}-{k}.parquet`) is of an earlier
    /// attempt of this subtask (or of one it took over); returns its transaction.
    fn leftover_transaction<'a>(&self, name: &'a str) -> Option<&'a str> {
        let rest = name.strip_prefix(&self.job)?.strip_prefix('-')?;
        let transaction = name.strip_suffix(".parquet")?.rsplit_once('-')?.0;
        let mut parts = rest.split('-');
        let token = AttemptToken::parse(parts.next()?)?;
        let writer: usize = parts.next()?.parse().ok()?;
        (writer % self.parallelism == self.subtask && self.token.supersedes(&token))
            .then_some(transaction)
    }

    /// Deletes the data files earlier attempts left uncommitted (see the module
    /// documentation). The first sweep, when the sink opens, lists the table's data files;
    /// the sweeps after it (for files an earlier attempt still running wrote late) list
    /// them at most every [`SWEEP_INTERVAL`], since a table may hold many.
    async fn delete_leftovers(&self, keep: &[Vec<u8>]) -> Result<()> {
        {
            let mut last = self.last_sweep.lock().expect("sweep lock");
            if last.is_some_and(|at| at.elapsed() < SWEEP_INTERVAL) {
                return Ok(());
            }
            *last = Some(std::time::Instant::now());
        }
        let table = &self.table;
        let files = table.files().await?;
        let metadata = table.current().await?.metadata;
        let mut kept = metadata.committed_transactions(&self.job);
        let live = live_manifests(files, &metadata)
            .await
            .map_err(|e| table.error(e))?;
        kept.extend(live.iter().filter_map(added_by_transaction));
        for handle in keep {
            kept.insert(Transaction::decode(handle)?.name);
        }
        let expired_before = metadata.expired_before_ms();
        let data = files.store.path.clone().join("data");
        let listing: Vec<_> = files
            .store
            .store
            .list_with_delimiter(Some(&data))
            .await?
            .objects;
        for object in listing {
            let Some(name) = object.location.filename() else {
                continue;
            };
            let Some(transaction) = self.leftover_transaction(name) else {
                continue;
            };
            let expired_maybe = expired_before
                .is_some_and(|before| object.last_modified.timestamp_millis() < before);
            if !kept.contains(transaction) && !expired_maybe {
                tracing::info!(file = %object.location, "deleting a data file an earlier attempt left uncommitted");
                delete_if_present(files, &object.location).await?;
            }
        }
        let unfinished = files
            .store
            .delete_unfinished_uploads(&data, false, |name| {
                self.leftover_transaction(name).is_some()
            })
            .await?;
        for file in unfinished {
            tracing::info!(%file, "deleted a data file an earlier attempt left half-written");
        }
        Ok(())
    }
}

impl TransactionCommitter for SnapshotCommitter {
    fn commit<'a>(&'a self, handle: &'a [u8]) -> BoxFuture<'a, Result<()>> {
        async move {
            let transaction = Transaction::decode(handle)?;
            self.commit_transaction(&transaction).await
        }
        .boxed()
    }

    fn abort_leftovers<'a>(&'a self, keep: &'a [Vec<u8>]) -> BoxFuture<'a, Result<()>> {
        self.delete_leftovers(keep).boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::iceberg::catalog::{Catalog, RestAuth, RestCatalog};

    #[test]
    fn a_transaction_handle_reads_back_and_a_cut_one_is_an_error() {
        let transaction = Transaction {
            name: "j-a1t5-0-t3".into(),
            checkpoint: 9,
            files: vec![DataFile {
                content: Content::EqualityDeletes,
                path: "s3://b/t/data/j-a1t5-0-t3-0.parquet".into(),
                record_count: 10,
                size: 2048,
                stats: ColumnStats {
                    value_counts: vec![(1, 10), (2, 10)],
                    null_counts: vec![(1, 0), (2, 4)],
                    lower_bounds: vec![(1, vec![1, 0, 0, 0, 0, 0, 0, 0])],
                    upper_bounds: vec![(1, vec![7, 0, 0, 0, 0, 0, 0, 0])],
                },
                partition: vec![
                    PartitionValue::Int(19_782),
                    PartitionValue::Null,
                    PartitionValue::String("eu".into()),
                ],
                equality_ids: vec![1, 3],
            }],
        };
        let handle = transaction.encode();
        assert_eq!(Transaction::decode(&handle).unwrap(), transaction);
        assert!(Transaction::decode(&handle[..handle.len() - 3]).is_err());
    }

    #[test]
    fn a_live_manifest_named_after_a_transaction_shows_it_committed() {
        let entry =
            |path: &str| Value::Record(vec![("manifest_path".into(), Value::String(path.into()))]);
        let live = [
            entry("s3://b/t/metadata/j-a1t5-0-t1-881-m0.avro"),
            entry("s3://b/t/metadata/3f2c-m0.avro"),
        ];
        assert!(holds_manifest_of(&live, "j-a1t5-0-t1"));
        assert!(!holds_manifest_of(&live, "j-a1t5-0-t10"));
        assert!(!holds_manifest_of(&live, "j-a1t5-0-t"));
        assert!(!holds_manifest_of(&live, "j-a1t5-1-t1"));
    }

    #[test]
    fn leftovers_are_the_files_of_earlier_attempts_of_the_subtasks_taken_over() {
        let token = AttemptToken::new(3);
        let table = IcebergTable::new(
            "t",
            Catalog::Rest(RestCatalog::new(
                "http://127.0.0.1:1",
                None,
                RestAuth::None,
                "n".into(),
                "t".into(),
            )),
            None,
            Vec::new(),
            super::super::metadata::TableShape {
                columns: Arc::new(Schema::empty()),
                partition_keys: Vec::new(),
                primary_key: Vec::new(),
            },
        );
        let committer = SnapshotCommitter {
            table: Arc::new(table),
            job: "4f3a-1".into(),
            token: token.clone(),
            subtask: 1,
            parallelism: 2,
            last_sweep: Default::default(),
        };
        let leftover = |name: &str| committer.leftover_transaction(name).map(str::to_string);
        assert_eq!(
            leftover("4f3a-1-a2t9-1-t4-0.parquet"),
            Some("4f3a-1-a2t9-1-t4".into())
        );
        // Subtask 3 of an earlier parallelism is taken over by subtask 1 of 2.
        assert_eq!(
            leftover("4f3a-1-a1t9-3-t0-12.parquet"),
            Some("4f3a-1-a1t9-3-t0".into())
        );
        assert_eq!(
            leftover("4f3a-1-a2t9-0-t4-0.parquet"),
            None,
            "another subtask's"
        );
        assert_eq!(
            leftover(&format!("4f3a-1-{token}-1-t0-0.parquet")),
            None,
            "its own"
        );
        assert_eq!(
            leftover("4f3a-1-a4t9-1-t0-0.parquet"),
            None,
            "a later attempt's"
        );
        assert_eq!(
            leftover("4f3a-2-a1t9-1-t0-0.parquet"),
            None,
            "another job's"
        );
        assert_eq!(leftover("00000-0-5e1c.parquet"), None, "another writer's");
    }
}
