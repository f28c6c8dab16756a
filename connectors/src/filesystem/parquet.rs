//! `'format' = 'parquet'` for the filesystem connector: a bulk format, written a part
//! file at a time by arrow-rs's Parquet writer (row groups of `parquet.block.size` bytes,
//! pages of `parquet.page.size`, column statistics in every row group and page) and read a
//! row group at a time, only the table's columns, each cast to the table's type.
//!
//! As in Flink, a Parquet part file rolls at every checkpoint: a file is only readable once
//! its footer is written, so it cannot stay open across one.

use std::collections::HashSet;
use std::ops::Range;
use std::sync::Arc;

use arrow::datatypes::{Field, SchemaRef};
use arrow::record_batch::RecordBatch;
use bytes::Bytes;
use eddy_common::object_storage::StorageLocation;
use eddy_common::{EddyError, Result};
use futures::future::BoxFuture;
use futures::{FutureExt, TryFutureExt};
use object_store::buffered::BufWriter;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};
use parquet::arrow::arrow_reader::statistics::StatisticsConverter;
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, RowSelection, RowSelector,
};
use parquet::arrow::async_reader::{AsyncFileReader, ParquetRecordBatchStream};
use parquet::arrow::{AsyncArrowWriter, ParquetRecordBatchStreamBuilder, ProjectionMask};
use parquet::basic::{Compression, ZstdLevel};
use parquet::errors::ParquetError;
use parquet::file::metadata::{ParquetMetaData, ParquetMetaDataReader};
use parquet::file::properties::{EnabledStatistics, WriterProperties};

use super::conform::Conform;
use crate::Options;
use crate::pushdown::ColumnBound;

/// The options `'format' = 'parquet'` takes (Flink passes `parquet.*` to Parquet's own
/// writer; these are the ones a Rust writer has).
pub const PARQUET_KEYS: &[&str] = &[
    "parquet.compression",
    "parquet.block.size",
    "parquet.page.size",
    "parquet.enable.dictionary",
];

/// How Parquet files are written.
#[derive(Debug, Clone)]
pub struct ParquetFormat {
    properties: Arc<WriterProperties>,
    /// A row group is closed once this many bytes are buffered (`parquet.block.size`).
    row_group_bytes: usize,
}

impl ParquetFormat {
    /// Reads the `parquet.*` options.
    pub fn from_options(options: &Options<'_>) -> Result<Self> {
        let compression = match options.get("parquet.compression") {
            None => Compression::SNAPPY,
            Some(name) => compression(name).ok_or_else(|| {
                options.error(format!(
                    "option 'parquet.compression' = '{name}': expected UNCOMPRESSED, SNAPPY, \
                     ZSTD or LZ4_RAW"
                ))
            })?,
        };
        let row_group_bytes = options.memory_size_or("parquet.block.size", 128 << 20)?;
        let page_bytes = options.memory_size_or("parquet.page.size", 1 << 20)?;
        if row_group_bytes == 0 || page_bytes == 0 {
            return Err(options.error(
                "options 'parquet.block.size' and 'parquet.page.size' must be at least 1 byte"
                    .into(),
            ));
        }
        let properties = WriterProperties::builder()
            .set_compression(compression)
            .set_data_page_size_limit(page_bytes as usize)
            .set_dictionary_enabled(options.flag("parquet.enable.dictionary", true)?)
            .set_statistics_enabled(EnabledStatistics::Page)
            .build();
        Ok(ParquetFormat {
            properties: Arc::new(properties),
            row_group_bytes: row_group_bytes as usize,
        })
    }
}

/// A codec by the name Parquet's writers give it.
fn compression(name: &str) -> Option<Compression> {
    Some(match name.to_ascii_uppercase().as_str() {
        "UNCOMPRESSED" | "NONE" => Compression::UNCOMPRESSED,
        "SNAPPY" => Compression::SNAPPY,
        "ZSTD" => Compression::ZSTD(ZstdLevel::default()),
        "LZ4_RAW" | "LZ4" => Compression::LZ4_RAW,
        _ => return None,
    })
}

/// One Parquet part file being written.
pub struct ParquetPart {
    writer: AsyncArrowWriter<BufWriter>,
    row_group_bytes: usize,
}

impl ParquetPart {
    /// A part file of rows shaped like `schema`, written through `upload`.
    pub fn new(format: &ParquetFormat, upload: BufWriter, schema: SchemaRef) -> Result<Self> {
        let properties = (*format.properties).clone();
        let writer = AsyncArrowWriter::try_new(upload, schema, Some(properties))
            .map_err(|e| parquet_error("opening a part file", e))?;
        Ok(ParquetPart {
            writer,
            row_group_bytes: format.row_group_bytes,
        })
    }

    /// Appends rows, closing the row group once it holds `parquet.block.size` bytes.
    pub async fn write(&mut self, rows: &RecordBatch) -> Result<()> {
        self.writer
            .write(rows)
            .await
            .map_err(|e| parquet_error("writing a part file", e))?;
        if self.writer.in_progress_size() >= self.row_group_bytes {
            self.writer
                .flush()
                .await
                .map_err(|e| parquet_error("writing a row group", e))?;
        }
        Ok(())
    }

    /// The file's size so far, counting the row group still in memory as encoded.
    pub fn bytes(&self) -> u64 {
        (self.writer.bytes_written() + self.writer.in_progress_size()) as u64
    }

    /// Writes the last row group and the footer, and completes the upload; returns the
    /// footer.
    pub async fn close(self) -> Result<ParquetMetaData> {
        self.writer
            .close()
            .await
            .map_err(|e| parquet_error("closing a part file", e))
    }

    /// Gives up the file: nothing of it becomes an object.
    pub async fn abort(self) -> Result<()> {
        self.writer.into_inner().abort().await?;
        Ok(())
    }
}

fn parquet_error(doing: &str, error: parquet::errors::ParquetError) -> EddyError {
    EddyError::External {
        system: "parquet",
        message: format!("{doing}: {error}"),
    }
}

/// A Parquet file's footer: its row groups and its columns.
#[derive(Debug, Clone)]
pub struct ParquetFooter {
    metadata: ArrowReaderMetadata,
}

impl ParquetFooter {
    /// Reads the footer of `path` (of `size` bytes); `shown` names the file in errors.
    pub async fn read(
        location: &StorageLocation,
        path: &Path,
        size: u64,
        shown: &str,
    ) -> Result<Self> {
        let mut reader = FileBytes::new(location, path, size);
        let metadata = ArrowReaderMetadata::load_async(&mut reader, Default::default())
            .await
            .map_err(|e| unreadable(shown, "its footer", e))?;
        Ok(ParquetFooter { metadata })
    }

    /// The row ranges of the file's row groups that hold rows, in order: `(first row,
    /// end)`; one empty range for a file without rows.
    pub fn row_ranges(&self) -> Vec<(u64, u64)> {
        let mut ranges: Vec<(u64, u64)> = self
            .row_groups()
            .into_iter()
            .map(|(_, first, end)| (first, end))
            .collect();
        if ranges.is_empty() {
            ranges.push((0, 0));
        }
        ranges
    }

    /// The row groups that hold rows (a writer may leave empty ones, which would share
    /// their first row with the next): `(index, first row, end)`.
    fn row_groups(&self) -> Vec<(usize, u64, u64)> {
        let mut groups = Vec::new();
        let mut first = 0u64;
        for (index, group) in self.metadata.metadata().row_groups().iter().enumerate() {
            let end = first + group.num_rows().max(0) as u64;
            if end > first {
                groups.push((index, first, end));
            }
            first = end;
        }
        groups
    }

    /// Reads rows `next..end` of the row group that starts at row `start`, `batch_size`
    /// rows at a time, shaped as `schema`: of its columns, those the file has and the
    /// query uses (`pushdown`; a column that cannot be NULL always) are read, the others
    /// are NULL. A row group whose statistics show that no row passes the query's bounds
    /// reads as no rows.
    pub fn open(
        &self,
        location: &StorageLocation,
        path: &Path,
        rows: RowGroupRead,
        schema: &SchemaRef,
        pushdown: &Pushdown<'_>,
        shown: &str,
    ) -> Result<ParquetRows> {
        let used = pushdown.used;
        let groups = self.row_groups();
        let Some(&(group, first, end)) = groups.iter().find(|(_, first, _)| *first == rows.start)
        else {
            return Err(EddyError::Snapshot(format!(
                "file '{shown}' has no row group starting at row {} (was it rewritten since \
                 the checkpoint?)",
                rows.start
            )));
        };
        let file_schema = self.metadata.schema();
        let read: Vec<&Field> = schema
            .fields()
            .iter()
            .filter(|f| {
                !f.is_nullable() || used.is_none_or(|used| used.contains(f.name().as_str()))
            })
            .map(|f| f.as_ref())
            .collect();
        let roots: Vec<usize> = read
            .iter()
            .filter_map(|f| file_schema.index_of(f.name()).ok())
            .collect();
        let mask = ProjectionMask::roots(self.metadata.parquet_schema(), roots);
        let skip = (rows.next.max(first) - first) as usize;
        let selection = RowSelection::from(vec![
            RowSelector::skip(skip),
            RowSelector::select((end - first) as usize - skip.min((end - first) as usize)),
        ]);
        // The projected batches hold the columns read, in the file's order.
        let mut projected: Vec<(usize, &str)> = read
            .iter()
            .filter_map(|f| Some((file_schema.index_of(f.name()).ok()?, f.name().as_str())))
            .collect();
        projected.sort_unstable();
        let names: Vec<&str> = projected.into_iter().map(|(_, name)| name).collect();
        let conform = Conform::new(file_schema, schema, &names, shown)?;
        if !self.may_pass(group, schema, pushdown.bounds) {
            tracing::debug!(file = %shown, row_group = group, "skipped by its statistics");
            return Ok(ParquetRows {
                stream: None,
                conform,
            });
        }
        let reader = FileBytes::new(location, path, rows.file_size);
        let stream =
            ParquetRecordBatchStreamBuilder::new_with_metadata(reader, self.metadata.clone())
                .with_row_groups(vec![group])
                .with_projection(mask)
                .with_row_selection(selection)
                .with_batch_size(rows.batch_size.max(1))
                .build()
                .map_err(|e| unreadable(shown, "a row group", e))?;
        Ok(ParquetRows {
            stream: Some(stream),
            conform,
        })
    }

    /// Whether row group `group` may hold a row passing every bound, by its statistics:
    /// only a column of the table's own type in the file is judged (any other is cast,
    /// and its statistics would bound the file's values, not the table's).
    fn may_pass(&self, group: usize, schema: &SchemaRef, bounds: &[ColumnBound]) -> bool {
        let file_schema = self.metadata.schema();
        let metadata = self.metadata.metadata();
        let row_group = metadata.row_group(group);
        bounds.iter().all(|bound| {
            let same_type = match (
                schema.field_with_name(&bound.column),
                file_schema.field_with_name(&bound.column),
            ) {
                (Ok(table), Ok(file)) => table.data_type() == file.data_type(),
                _ => false,
            };
            if !same_type {
                return true;
            }
            let Ok(converter) = StatisticsConverter::try_new(
                &bound.column,
                file_schema,
                self.metadata.parquet_schema(),
            ) else {
                return true;
            };
            match (
                converter.row_group_mins([row_group]),
                converter.row_group_maxes([row_group]),
            ) {
                (Ok(min), Ok(max)) => bound.may_pass(&min, &max),
                _ => true,
            }
        })
    }
}

/// What the query tells a Parquet reader: the columns it uses (all when `None`), and
/// bounds its rows pass.
#[derive(Debug, Default)]
pub struct Pushdown<'a> {
    /// The columns used, by name.
    pub used: Option<&'a HashSet<&'a str>>,
    /// Bounds every row kept passes.
    pub bounds: &'a [ColumnBound],
}

/// Which rows of a row group to read.
#[derive(Debug, Clone, Copy)]
pub struct RowGroupRead {
    /// The row group's first row in the file.
    pub start: u64,
    /// The first row not read yet.
    pub next: u64,
    /// The file's size in bytes.
    pub file_size: u64,
    /// Rows per batch.
    pub batch_size: usize,
}

/// The rows of one row group as they are read, shaped as the table's.
pub struct ParquetRows {
    /// `None` for a row group skipped by its statistics.
    stream: Option<ParquetRecordBatchStream<FileBytes>>,
    conform: Conform,
}

impl ParquetRows {
    /// The next batch, or `None` at the row group's end.
    pub async fn next(&mut self) -> Result<Option<RecordBatch>> {
        use futures::StreamExt;
        let Some(stream) = &mut self.stream else {
            return Ok(None);
        };
        let Some(batch) = stream.next().await else {
            return Ok(None);
        };
        let batch = batch.map_err(|e| unreadable(self.conform.shown(), "a row group", e))?;
        self.conform.apply(&batch).map(Some)
    }
}

/// The bytes of a file in object storage, as the Parquet reader asks for them.
struct FileBytes {
    store: Arc<dyn ObjectStore>,
    path: Path,
    size: u64,
}

impl FileBytes {
    fn new(location: &StorageLocation, path: &Path, size: u64) -> Self {
        FileBytes {
            store: location.store.clone(),
            path: path.clone(),
            size,
        }
    }
}

fn store_error(error: object_store::Error) -> ParquetError {
    ParquetError::External(Box::new(error))
}

impl AsyncFileReader for FileBytes {
    fn get_bytes(&mut self, range: Range<u64>) -> BoxFuture<'_, parquet::errors::Result<Bytes>> {
        self.store
            .get_range(&self.path, range)
            .map_err(store_error)
            .boxed()
    }

    fn get_byte_ranges(
        &mut self,
        ranges: Vec<Range<u64>>,
    ) -> BoxFuture<'_, parquet::errors::Result<Vec<Bytes>>> {
        async move {
            self.store
                .get_ranges(&self.path, &ranges)
                .await
                .map_err(store_error)
        }
        .boxed()
    }

    fn get_metadata<'a>(
        &'a mut self,
        options: Option<&'a ArrowReaderOptions>,
    ) -> BoxFuture<'a, parquet::errors::Result<Arc<ParquetMetaData>>> {
        async move {
            let size = self.size;
            let metadata = ParquetMetaDataReader::new()
                .with_arrow_reader_options(options)
                .load_and_finish(self, size)
                .await?;
            Ok(Arc::new(metadata))
        }
        .boxed()
    }
}

/// A Parquet file (or part of one) that cannot be read: the store failed (which may pass),
/// or the file is not valid Parquet (which will not).
fn unreadable(shown: &str, what: &str, error: parquet::errors::ParquetError) -> EddyError {
    match error {
        parquet::errors::ParquetError::External(source) => EddyError::External {
            system: "object storage",
            message: format!("reading {what} of '{shown}': {source}"),
        },
        corrupt => EddyError::UnreadableFile {
            file: shown.to_string(),
            message: format!("not a readable Parquet file: {what}: {corrupt}"),
        },
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use arrow::array::{Int32Array, Int64Array, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};
    use eddy_common::object_storage::resolve;

    use super::*;

    fn format(options: &[(&str, &str)]) -> Result<ParquetFormat> {
        let values: BTreeMap<String, String> = options
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let options = Options::validate("t", "filesystem", &values, PARQUET_KEYS, &[])?;
        ParquetFormat::from_options(&options)
    }

    /// A file of `ids` (INT) and their names, written in row groups of about `group` rows.
    async fn written(
        name: &str,
        ids: std::ops::Range<i32>,
        group: usize,
    ) -> (StorageLocation, Path, u64) {
        let dir = std::env::temp_dir().join(format!("eddy-parquet-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let location = resolve(dir.to_str().unwrap(), &[]).unwrap();
        let path = location.path.clone().join("part-0.parquet");
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int32, false),
            Field::new("name", DataType::Utf8, true),
        ]));
        let format = format(&[("parquet.block.size", "1b")]).unwrap();
        let upload = BufWriter::new(location.store.clone(), path.clone());
        let mut part = ParquetPart::new(&format, upload, schema.clone()).unwrap();
        let ids: Vec<i32> = ids.collect();
        for rows in ids.chunks(group) {
            let names: Vec<String> = rows.iter().map(|i| format!("n{i}")).collect();
            let batch = RecordBatch::try_new(
                schema.clone(),
                vec![
                    Arc::new(Int32Array::from(rows.to_vec())),
                    Arc::new(StringArray::from(names)),
                ],
            )
            .unwrap();
            part.write(&batch).await.unwrap();
        }
        assert!(part.bytes() > 0);
        part.close().await.unwrap();
        let size = location.store.head(&path).await.unwrap().size;
        (location, path, size)
    }

    /// Every row read from the row group starting at `start`, from row `next` on.
    async fn read(
        file: &(StorageLocation, Path, u64),
        table: &SchemaRef,
        start: u64,
        next: u64,
    ) -> Result<Vec<RecordBatch>> {
        read_used(file, table, start, next, None, &[]).await
    }

    /// As [`read`], of the columns `used` only, with the query's `bounds`.
    async fn read_used(
        (location, path, size): &(StorageLocation, Path, u64),
        table: &SchemaRef,
        start: u64,
        next: u64,
        used: Option<&HashSet<&str>>,
        bounds: &[ColumnBound],
    ) -> Result<Vec<RecordBatch>> {
        let footer = ParquetFooter::read(location, path, *size, "f").await?;
        let rows = RowGroupRead {
            start,
            next,
            file_size: *size,
            batch_size: 2,
        };
        let pushdown = Pushdown { used, bounds };
        let mut reader = footer.open(location, path, rows, table, &pushdown, "f")?;
        let mut batches = Vec::new();
        while let Some(batch) = reader.next().await? {
            batches.push(batch);
        }
        Ok(batches)
    }

    #[tokio::test]
    async fn row_groups_whose_statistics_miss_a_bound_read_as_no_rows() {
        use crate::pushdown::BoundOp;
        // Row groups of ids 0-3, 4-7 and 8-11.
        let file = written("bounds", 0..12, 4).await;
        let table = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int32, false),
            Field::new("name", DataType::Utf8, true),
        ]));
        let bound = |op, v: i32| {
            let value = Arc::new(Int32Array::from(vec![v]));
            ColumnBound::new("id", &DataType::Int32, op, value).unwrap()
        };
        let rows = |batches: Vec<RecordBatch>| batches.iter().map(|b| b.num_rows()).sum();
        let cases = [
            (vec![bound(BoundOp::Gt, 5)], [0, 4, 4]),
            (vec![bound(BoundOp::Eq, 4)], [0, 4, 0]),
            (vec![bound(BoundOp::Lt, 4)], [4, 0, 0]),
            (
                vec![bound(BoundOp::LtEq, 4), bound(BoundOp::GtEq, 3)],
                [4, 4, 0],
            ),
            (vec![], [4, 4, 4]),
        ];
        for (bounds, expected) in cases {
            let mut read: Vec<usize> = Vec::new();
            for start in [0, 4, 8] {
                let batches = read_used(&file, &table, start, start, None, &bounds).await;
                read.push(rows(batches.unwrap()));
            }
            assert_eq!(read, expected, "{bounds:?}");
        }
        // A table reading the column as another type is not judged by the file's.
        let wider = Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, false)]));
        let value = Arc::new(arrow::array::Int64Array::from(vec![100]));
        let past = ColumnBound::new("id", &DataType::Int64, BoundOp::Gt, value).unwrap();
        let batches = read_used(&file, &wider, 0, 0, None, &[past]).await;
        assert_eq!(rows(batches.unwrap()), 4);
    }

    #[tokio::test]
    async fn row_groups_are_read_from_where_a_checkpoint_left_off_as_the_table_types_them() {
        let file = written("resume", 0..10, 4).await;
        let footer = ParquetFooter::read(&file.0, &file.1, file.2, "f")
            .await
            .unwrap();
        assert_eq!(footer.row_ranges(), vec![(0, 4), (4, 8), (8, 10)]);
        // The table widens id to BIGINT, reorders the columns and has one the file lacks.
        let table = Arc::new(Schema::new(vec![
            Field::new("missing", DataType::Utf8, true),
            Field::new("name", DataType::Utf8, true),
            Field::new("id", DataType::Int64, true),
        ]));
        let batches = read(&file, &table, 4, 5).await.unwrap();
        let rows = arrow::compute::concat_batches(&table, &batches).unwrap();
        assert_eq!(rows.num_rows(), 3);
        assert_eq!(rows.column(0).null_count(), 3);
        let ids = rows
            .column(2)
            .as_any()
            .downcast_ref::<Int64Array>()
            .unwrap();
        assert_eq!(ids.values(), &[5, 6, 7]);
        let names = rows
            .column(1)
            .as_any()
            .downcast_ref::<StringArray>()
            .unwrap();
        assert_eq!(names.value(0), "n5");
        let error = read(&file, &table, 3, 3).await.unwrap_err().to_string();
        assert!(error.contains("no row group starting at row 3"), "{error}");
        // A query that uses the names only: the ids are not read (NULL); none, only counted.
        for (used, nulls) in [(vec!["name"], [3, 0, 3]), (vec![], [3, 3, 3])] {
            let used: HashSet<&str> = used.into_iter().collect();
            let batches = read_used(&file, &table, 0, 1, Some(&used), &[])
                .await
                .unwrap();
            let rows = arrow::compute::concat_batches(&table, &batches).unwrap();
            assert_eq!(rows.num_rows(), 3);
            let found: Vec<usize> = rows.columns().iter().map(|c| c.null_count()).collect();
            assert_eq!(found, nulls, "{used:?}");
        }
        // A column that cannot be NULL is read all the same.
        let strict = Arc::new(Schema::new(vec![Field::new("id", DataType::Int32, false)]));
        let batches = read_used(&file, &strict, 0, 0, Some(&HashSet::new()), &[])
            .await
            .unwrap();
        assert_eq!(batches[0].column(0).null_count(), 0);
    }

    #[tokio::test]
    async fn text_is_not_read_as_numbers_nor_a_corrupt_footer_as_a_file() {
        let file = written("types", 0..3, 3).await;
        let table = Arc::new(Schema::new(vec![Field::new("name", DataType::Int64, true)]));
        let error = read(&file, &table, 0, 0).await.unwrap_err().to_string();
        assert!(
            error.contains("file 'f': column 'name' is Utf8 in the file"),
            "{error}"
        );
        let local = std::path::Path::new("/").join(file.1.as_ref());
        let mut bytes = std::fs::read(&local).unwrap();
        let at = bytes.len() - 12;
        bytes[at..at + 4].copy_from_slice(&[0xff; 4]);
        std::fs::write(&local, &bytes).unwrap();
        let error = ParquetFooter::read(&file.0, &file.1, file.2, "f")
            .await
            .unwrap_err();
        assert!(!error.is_transient(), "{error}");
        let error = error.to_string();
        assert!(
            error.starts_with("file 'f': not a readable Parquet file"),
            "{error}"
        );
    }

    /// A file whose first row group is empty (as some writers leave one): the rows of the
    /// next, which starts at the same row, are read.
    #[tokio::test]
    async fn an_empty_row_group_hides_no_rows() {
        use parquet::data_type::Int64Type;
        use parquet::file::writer::SerializedFileWriter;
        use parquet::schema::parser::parse_message_type;
        let dir = std::env::temp_dir().join(format!("eddy-parquet-empty-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let file = std::fs::File::create(dir.join("f.parquet")).unwrap();
        let schema = Arc::new(parse_message_type("message m { required int64 id; }").unwrap());
        let mut writer = SerializedFileWriter::new(file, schema, Default::default()).unwrap();
        for ids in [&[][..], &[7, 8, 9][..]] {
            let mut group = writer.next_row_group().unwrap();
            let mut column = group.next_column().unwrap().unwrap();
            column
                .typed::<Int64Type>()
                .write_batch(ids, None, None)
                .unwrap();
            column.close().unwrap();
            group.close().unwrap();
        }
        writer.close().unwrap();
        let location = resolve(dir.to_str().unwrap(), &[]).unwrap();
        let path = location.path.clone().join("f.parquet");
        let size = location.store.head(&path).await.unwrap().size;
        let footer = ParquetFooter::read(&location, &path, size, "f")
            .await
            .unwrap();
        assert_eq!(footer.row_ranges(), vec![(0, 3)]);
        let table = Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, false)]));
        let batches = read(&(location, path, size), &table, 0, 0).await.unwrap();
        let rows = arrow::compute::concat_batches(&table, &batches).unwrap();
        let ids = rows.column(0).as_any().downcast_ref::<Int64Array>();
        assert_eq!(ids.unwrap().values(), &[7, 8, 9]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn options_name_the_codec_and_sizes() {
        assert!(format(&[("parquet.compression", "zstd")]).is_ok());
        let error = format(&[("parquet.compression", "brotli")]).unwrap_err();
        assert!(
            error.to_string().contains("expected UNCOMPRESSED, SNAPPY"),
            "{error}"
        );
        assert!(format(&[("parquet.page.size", "0")]).is_err());
        assert!(format(&[("parquet.enable.dictionary", "maybe")]).is_err());
    }
}
