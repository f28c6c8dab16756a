//! `'format' = 'avro'` for the filesystem connector: Avro object container files, as
//! Flink's `avro` format writes and reads them in files. A bulk format: a part file is
//! written a block per batch through arrow-avro's container writer (the table's Avro
//! schema derived as Flink derives it, compressed by `avro.codec`, Snappy by default) and
//! rolls at every checkpoint; a file is read whole, a split of its own, its columns
//! matched to the table's by name (its own schema, from its header, is the writer's).

use std::io::Write;
use std::sync::{Arc, Mutex};

use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use arrow_avro::compression::CompressionCodec;
use arrow_avro::reader::{Reader, ReaderBuilder};
use arrow_avro::writer::WriterBuilder;
use arrow_avro::writer::format::AvroOcfFormat;
use bytes::Bytes;
use eddy_common::object_storage::StorageLocation;
use eddy_common::{EddyError, Result};
use object_store::ObjectStoreExt;
use object_store::buffered::BufWriter;
use object_store::path::Path;
use tokio::io::AsyncWriteExt;

use super::conform::Conform;
use crate::Options;
use crate::format::avro::schema::{EncoderShape, table_schema};

/// The options `'format' = 'avro'` takes in files.
pub const AVRO_FILE_KEYS: &[&str] = &["avro.codec", "avro.timestamp_mapping.legacy"];

/// How Avro files are written.
#[derive(Debug, Clone)]
pub struct AvroFileFormat {
    codec: Option<CompressionCodec>,
    legacy_timestamps: bool,
}

impl AvroFileFormat {
    /// Reads the `avro.*` options.
    pub fn from_options(options: &Options<'_>) -> Result<Self> {
        let codec = match options.get("avro.codec").unwrap_or("snappy") {
            "null" => None,
            "snappy" => Some(CompressionCodec::Snappy),
            "deflate" => Some(CompressionCodec::Deflate),
            "zstandard" | "zstd" => Some(CompressionCodec::ZStandard),
            other => {
                return Err(options.error(format!(
                    "option 'avro.codec' = '{other}': expected null, snappy, deflate or \
                     zstandard"
                )));
            }
        };
        Ok(AvroFileFormat {
            codec,
            legacy_timestamps: options.flag("avro.timestamp_mapping.legacy", true)?,
        })
    }
}

/// The bytes the container writer has written and the upload not yet taken.
#[derive(Clone, Default)]
struct Pending(Arc<Mutex<Vec<u8>>>);

impl Write for Pending {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .expect("pending bytes")
            .extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Pending {
    fn take(&self) -> Vec<u8> {
        std::mem::take(&mut *self.0.lock().expect("pending bytes"))
    }
}

/// One Avro part file being written.
pub struct AvroPart {
    writer: arrow_avro::writer::Writer<Pending, AvroOcfFormat>,
    pending: Pending,
    upload: BufWriter,
    /// The table's columns as the encoder takes them.
    shape: EncoderShape,
    bytes: u64,
}

impl AvroPart {
    /// A part file of rows shaped like `schema`, written through `upload`.
    pub fn new(format: &AvroFileFormat, upload: BufWriter, schema: &SchemaRef) -> Result<Self> {
        let avro_schema = table_schema(schema.fields(), format.legacy_timestamps)
            .map_err(|e| EddyError::Unsupported(e.to_string()))?;
        let shape = EncoderShape::new(schema, &avro_schema);
        let pending = Pending::default();
        let writer = WriterBuilder::new(shape.schema().as_ref().clone())
            .with_compression(format.codec)
            .build::<_, AvroOcfFormat>(pending.clone())
            .map_err(|e| avro_error("opening a part file", e))?;
        Ok(AvroPart {
            writer,
            pending,
            upload,
            shape,
            bytes: 0,
        })
    }

    /// Appends rows as a block.
    pub async fn write(&mut self, rows: &RecordBatch) -> Result<()> {
        let batch = self.shape.shape(rows)?;
        self.writer
            .write(&batch)
            .map_err(|e| avro_error("writing a part file", e))?;
        self.upload_pending().await
    }

    async fn upload_pending(&mut self) -> Result<()> {
        let bytes = self.pending.take();
        self.bytes += bytes.len() as u64;
        self.upload.write_all(&bytes).await?;
        Ok(())
    }

    /// The file's size so far.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Writes what is buffered and completes the upload.
    pub async fn close(mut self) -> Result<()> {
        self.writer
            .finish()
            .map_err(|e| avro_error("closing a part file", e))?;
        self.upload_pending().await?;
        self.upload.shutdown().await?;
        Ok(())
    }

    /// Gives up the file: nothing of it becomes an object.
    pub async fn abort(mut self) -> Result<()> {
        self.upload.abort().await?;
        Ok(())
    }
}

fn avro_error(doing: &str, error: arrow_avro::errors::AvroError) -> EddyError {
    EddyError::External {
        system: "avro",
        message: format!("{doing}: {error}"),
    }
}

/// The rows of one Avro file as they are read, shaped as the table's.
pub struct AvroFileRows {
    reader: Reader<std::io::Cursor<Bytes>>,
    conform: Conform,
    /// The rest of a batch a restore skipped into.
    carried: Option<RecordBatch>,
}

impl AvroFileRows {
    /// Reads `path`, `batch_size` rows at a time, from row `next` on, shaped as `table`.
    pub async fn open(
        location: &StorageLocation,
        path: &Path,
        next: u64,
        batch_size: usize,
        table: &SchemaRef,
        shown: &str,
    ) -> Result<Self> {
        let bytes = location.store.get(path).await?.bytes().await?;
        let unreadable = |e: arrow::error::ArrowError| EddyError::UnreadableFile {
            file: shown.to_string(),
            message: format!("not an Avro container file: {e}"),
        };
        let mut reader = ReaderBuilder::new()
            .with_batch_size(batch_size.max(1))
            .build(std::io::Cursor::new(bytes))
            .map_err(unreadable)?;
        let file_schema = reader.schema();
        let names: Vec<&str> = file_schema
            .fields()
            .iter()
            .map(|f| f.name().as_str())
            .collect();
        let conform = Conform::new(&file_schema, table, &names, shown)?;
        // Skip the rows a restored checkpoint read.
        let mut skip = next as usize;
        let mut carried = None;
        while skip > 0 {
            let Some(batch) = reader.next() else {
                return Err(EddyError::Snapshot(format!(
                    "file '{shown}' has fewer rows than a checkpoint read of it (was it \
                     rewritten since?)"
                )));
            };
            let batch = batch.map_err(unreadable)?;
            if batch.num_rows() > skip {
                carried = Some(batch.slice(skip, batch.num_rows() - skip));
            }
            skip = skip.saturating_sub(batch.num_rows());
        }
        Ok(AvroFileRows {
            reader,
            conform,
            carried,
        })
    }

    /// The next batch, or `None` at the file's end.
    pub fn next(&mut self) -> Result<Option<RecordBatch>> {
        if let Some(batch) = self.carried.take() {
            return self.conform.apply(&batch).map(Some);
        }
        let Some(batch) = self.reader.next() else {
            return Ok(None);
        };
        let batch = batch.map_err(|e| EddyError::UnreadableFile {
            file: self.conform.shown().to_string(),
            message: format!("a block: {e}"),
        })?;
        self.conform.apply(&batch).map(Some)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use arrow::array::{Int32Array, Int64Array, StringArray, TimestampMillisecondArray};
    use arrow::compute::concat_batches;
    use arrow::datatypes::{DataType, Field, Schema, TimeUnit};
    use eddy_common::object_storage::resolve;

    use super::*;

    fn format(codec: &str) -> AvroFileFormat {
        let values: BTreeMap<String, String> =
            [("avro.codec".to_string(), codec.to_string())].into();
        let options = Options::validate("t", "filesystem", &values, AVRO_FILE_KEYS, &[]).unwrap();
        AvroFileFormat::from_options(&options).unwrap()
    }

    fn table() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int32, false),
            Field::new("name", DataType::Utf8, true),
            Field::new("ts", DataType::Timestamp(TimeUnit::Millisecond, None), true),
        ]))
    }

    /// A file of 100 rows written in batches of 30, with `codec`.
    async fn written(codec: &str) -> (StorageLocation, Path) {
        let dir = std::env::temp_dir().join(format!("eddy-avro-{codec}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let location = resolve(dir.to_str().unwrap(), &[]).unwrap();
        let path = location.path.clone().join("part-0.avro");
        let upload = BufWriter::new(location.store.clone(), path.clone());
        let mut part = AvroPart::new(&format(codec), upload, &table()).unwrap();
        let ids: Vec<i32> = (0..100).collect();
        for rows in ids.chunks(30) {
            let names: Vec<Option<String>> = rows
                .iter()
                .map(|i| (i % 9 != 0).then(|| format!("n{i}")))
                .collect();
            let batch = RecordBatch::try_new(
                table(),
                vec![
                    Arc::new(Int32Array::from(rows.to_vec())),
                    Arc::new(StringArray::from(names)),
                    Arc::new(TimestampMillisecondArray::from_iter_values(
                        rows.iter().map(|i| 1_704_067_200_000 + i64::from(*i)),
                    )),
                ],
            )
            .unwrap();
            part.write(&batch).await.unwrap();
        }
        assert!(part.bytes() > 0);
        part.close().await.unwrap();
        (location, path)
    }

    async fn read_from(
        file: &(StorageLocation, Path),
        table: &SchemaRef,
        next: u64,
    ) -> Result<RecordBatch> {
        let mut rows = AvroFileRows::open(&file.0, &file.1, next, 16, table, "part-0.avro").await?;
        let mut batches = Vec::new();
        while let Some(batch) = rows.next()? {
            batches.push(batch);
        }
        Ok(concat_batches(table, &batches)?)
    }

    #[tokio::test]
    async fn part_files_read_back_whole_and_from_any_row_with_every_codec() {
        for codec in ["null", "snappy", "deflate", "zstandard"] {
            let file = written(codec).await;
            let all = read_from(&file, &table(), 0).await.unwrap();
            assert_eq!(all.num_rows(), 100, "{codec}");
            let ids = all.column(0).as_any().downcast_ref::<Int32Array>().unwrap();
            assert_eq!(ids.values().to_vec(), (0..100).collect::<Vec<_>>());
            assert!(all.column(1).is_null(9) && all.column(1).is_valid(10));
            // A restore mid-batch (batches of 16 rows) reads the rest.
            let rest = read_from(&file, &table(), 37).await.unwrap();
            assert_eq!(rest, all.slice(37, 63), "{codec}");
            let error = read_from(&file, &table(), 101)
                .await
                .unwrap_err()
                .to_string();
            assert!(
                error.contains("fewer rows than a checkpoint read"),
                "{error}"
            );
        }
    }

    #[tokio::test]
    async fn columns_are_matched_by_name_and_cast_or_refused() {
        let file = written("null").await;
        let wider = Arc::new(Schema::new(vec![
            Field::new("missing", DataType::Utf8, true),
            Field::new("id", DataType::Int64, false),
        ]));
        let read = read_from(&file, &wider, 0).await.unwrap();
        assert!(read.column(0).is_null(0));
        let ids = read
            .column(1)
            .as_any()
            .downcast_ref::<Int64Array>()
            .unwrap();
        assert_eq!(ids.value(99), 99);
        let text_as_number = Arc::new(Schema::new(vec![Field::new("name", DataType::Int64, true)]));
        let error = read_from(&file, &text_as_number, 0)
            .await
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("column 'name'") && error.contains("part-0.avro"),
            "{error}"
        );
        // Not a container file.
        let path = file.0.path.clone().join("bad.avro");
        file.0
            .store
            .put(&path, b"Obj\x01garbage".to_vec().into())
            .await
            .unwrap();
        let error = read_from(&(file.0.clone(), path), &table(), 0)
            .await
            .unwrap_err()
            .to_string();
        assert!(error.contains("not an Avro container file"), "{error}");
    }
}
