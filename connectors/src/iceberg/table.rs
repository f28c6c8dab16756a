//! The Iceberg table a sink writes: loaded from its catalog (or created there), its files
//! in object storage, and a snapshot committed through the catalog.

use std::sync::Arc;

use arrow::compute::cast;
use arrow::datatypes::{Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use eddy_common::event::wall_clock;
use eddy_common::object_storage::{StorageLocation, resolve};
use eddy_common::{EddyError, Result};
use object_store::path::Path;
use object_store::{ObjectStoreExt, PutPayload};
use serde_json::Value as Json;
use tokio::sync::OnceCell;

use super::IcebergError;
use super::catalog::Catalog;
use super::metadata::{TableMetadata, TableShape, check_columns, identity_spec};
use super::partition::PartitionSpec;

/// The Iceberg table a sink writes, loaded (or created) once per subtask.
pub struct IcebergTable {
    /// The Eddy table's name, for messages.
    pub name: String,
    catalog: Catalog,
    warehouse: Option<String>,
    s3: Vec<(String, String)>,
    shape: TableShape,
    loaded: OnceCell<TableFiles>,
}

/// The table as its catalog has it now.
pub struct Loaded {
    /// The current metadata file.
    pub location: String,
    /// Its contents.
    pub metadata: TableMetadata,
}

/// Where a table's files are, and how rows are written into them.
pub struct TableFiles {
    /// The table's location, as its metadata spells it (`file:///…`, `s3://…`).
    pub base: String,
    /// The same location in object storage.
    pub store: StorageLocation,
    /// The data files' schema: the Iceberg fields of the table's columns, with ids.
    pub file_schema: SchemaRef,
    /// How rows are split among data files.
    pub spec: PartitionSpec,
    /// The equality fields of deletes: the primary key's columns, if it has one.
    pub equality: Option<EqualityFields>,
}

/// The columns whose values identify a row to delete (the primary key's), as equality
/// delete files hold them.
pub struct EqualityFields {
    /// Their indices among the data files' columns.
    pub columns: Vec<usize>,
    /// Their Iceberg field ids.
    pub ids: Vec<i32>,
    /// The schema of equality delete files: theirs, with their field ids.
    pub schema: SchemaRef,
}

impl IcebergTable {
    /// The table of `catalog` written with rows shaped as `shape` says, created so under
    /// `warehouse` when missing, its files reached with the `s3` options.
    pub fn new(
        name: &str,
        catalog: Catalog,
        warehouse: Option<String>,
        s3: Vec<(String, String)>,
        shape: TableShape,
    ) -> Self {
        IcebergTable {
            name: name.to_string(),
            catalog,
            warehouse,
            s3,
            shape,
            loaded: OnceCell::new(),
        }
    }

    /// An error about this table.
    pub fn error(&self, error: IcebergError) -> EddyError {
        error.for_table(&self.name)
    }

    /// The table's files, loading the table (and creating it when the catalog lacks it)
    /// and checking the columns against its schema the first time.
    pub async fn files(&self) -> Result<&TableFiles> {
        self.loaded
            .get_or_try_init(|| async {
                let loaded = match self.load().await? {
                    Some(loaded) => loaded,
                    None => self.create().await?,
                };
                self.table_files(&loaded.metadata)
                    .map_err(|e| self.error(e))
            })
            .await
    }

    /// The table as the catalog has it now, `None` when the catalog lacks it.
    pub async fn load(&self) -> Result<Option<Loaded>> {
        match &self.catalog {
            Catalog::Sql(sql) => match sql.load().await.map_err(|e| self.error(e))? {
                Some(location) => Ok(Some(Loaded {
                    metadata: self.read_metadata(&location).await?,
                    location,
                })),
                None => Ok(None),
            },
            Catalog::Rest(rest) => {
                Ok(rest
                    .load()
                    .await
                    .map_err(|e| self.error(e))?
                    .map(|table| Loaded {
                        location: table.location,
                        metadata: table.metadata,
                    }))
            }
        }
    }

    /// The table as the catalog has it now, which must exist.
    pub async fn current(&self) -> Result<Loaded> {
        self.load().await?.ok_or_else(|| {
            self.error(IcebergError::Metadata(format!(
                "the catalog no longer has table '{}'",
                self.catalog.table_name()
            )))
        })
    }

    /// Reads a metadata file from its location (object storage is resolved for it alone:
    /// the table's location is only known from it).
    async fn read_metadata(&self, location: &str) -> Result<TableMetadata> {
        let (directory, name) = location.rsplit_once('/').unwrap_or(("", location));
        let store = self.resolve(directory)?;
        let bytes = store
            .store
            .get(&store.path.clone().join(name))
            .await
            .map_err(|e| self.error(e.into()))?
            .bytes()
            .await
            .map_err(|e| self.error(e.into()))?;
        TableMetadata::parse(&bytes, location).map_err(|e| self.error(e))
    }

    fn resolve(&self, location: &str) -> Result<StorageLocation> {
        let s3: Vec<(&str, &str)> = self
            .s3
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let location = location.replacen("s3a://", "s3://", 1);
        resolve(&location, &s3).map_err(|e| EddyError::Connector {
            table: self.name.clone(),
            message: e.to_string(),
        })
    }

    /// Creates the table, unpartitioned, with the sink's columns; when another writer
    /// created it first, loads theirs.
    async fn create(&self) -> Result<Loaded> {
        let created = match &self.catalog {
            Catalog::Sql(_) => self.create_in_sql_catalog().await?,
            Catalog::Rest(rest) => {
                let unpartitioned = TableShape {
                    partition_keys: Vec::new(),
                    ..self.shape.clone()
                };
                let schema = TableMetadata::create("", &unpartitioned, 0)
                    .and_then(|m| m.schema_json())
                    .map_err(|e| self.error(e))?;
                let schema: Json = serde_json::from_str(&schema.1).unwrap_or_default();
                let spec = identity_spec(&self.shape.columns, &self.shape.partition_keys)
                    .map_err(|e| self.error(e))?;
                rest.create(schema, spec)
                    .await
                    .map_err(|e| self.error(e))?
                    .map(|table| Loaded {
                        location: table.location,
                        metadata: table.metadata,
                    })
            }
        };
        match created {
            Some(loaded) => {
                tracing::info!(table = %self.name, iceberg = %self.catalog.table_name(), "created the Iceberg table");
                Ok(loaded)
            }
            None => self.current().await,
        }
    }

    /// Writes a new table's first metadata file under the warehouse and registers it;
    /// `None` when another writer registered the table first.
    async fn create_in_sql_catalog(&self) -> Result<Option<Loaded>> {
        let Catalog::Sql(sql) = &self.catalog else {
            return Ok(None);
        };
        let Some(warehouse) = &self.warehouse else {
            return Err(self.error(IcebergError::Schema(format!(
                "the catalog has no table '{}', and without 'warehouse' Eddy cannot create it",
                self.catalog.table_name()
            ))));
        };
        let warehouse = match warehouse.contains("://") {
            true => warehouse.trim_end_matches('/').to_string(),
            false => {
                let absolute = std::path::absolute(warehouse)?;
                format!("file://{}", absolute.display())
            }
        };
        let location = format!("{warehouse}/{}/{}", sql.namespace, sql.table);
        let metadata = TableMetadata::create(&location, &self.shape, wall_clock())
            .map_err(|e| self.error(e))?;
        let file = format!(
            "{location}/metadata/00000-{}.metadata.json",
            uuid::Uuid::new_v4()
        );
        let files = self.table_files(&metadata).map_err(|e| self.error(e))?;
        files
            .put(&file, metadata.to_bytes())
            .await
            .map_err(|e| self.error(e))?;
        if sql.register(&file).await.map_err(|e| self.error(e))? {
            return Ok(Some(Loaded {
                location: file,
                metadata,
            }));
        }
        files.delete(&file).await;
        Ok(None)
    }

    fn table_files(&self, metadata: &TableMetadata) -> Result<TableFiles, IcebergError> {
        let written = check_columns(&self.shape.written_columns(), &metadata.fields()?)?;
        let written_fields: Vec<_> = written.iter().map(|(_, f)| f.clone()).collect();
        let spec = PartitionSpec::of(metadata, &written_fields)?;
        let fields: Vec<_> = written
            .iter()
            .filter_map(|(_, field)| field.arrow_field())
            .collect();
        let file_schema = Arc::new(Schema::new(fields));
        let equality = self.equality_fields(&file_schema, &written_fields, &spec)?;
        let base = metadata.location()?.to_string();
        let store = self
            .resolve(&base)
            .map_err(|e| IcebergError::Metadata(e.to_string()))?;
        Ok(TableFiles {
            base,
            store,
            file_schema,
            spec,
            equality,
        })
    }

    /// The primary key's columns as equality fields. Each partition field must transform
    /// one of them: an equality delete only deletes rows of its own partition, so a row
    /// whose key stays but whose partition changes would otherwise be left behind.
    fn equality_fields(
        &self,
        file_schema: &SchemaRef,
        written: &[super::metadata::IcebergField],
        spec: &PartitionSpec,
    ) -> Result<Option<EqualityFields>, IcebergError> {
        let key = &self.shape.primary_key;
        if key.is_empty() {
            return Ok(None);
        }
        // The data files' columns are the sink's, in its order.
        let columns: Vec<usize> = key
            .iter()
            .map(|name| {
                self.shape.columns.index_of(name).map_err(|_| {
                    IcebergError::Schema(format!("primary key column '{name}' is not written"))
                })
            })
            .collect::<Result<_, _>>()?;
        if let Some((name, column)) = spec
            .source_columns()
            .find(|(_, column)| !columns.contains(column))
        {
            return Err(IcebergError::Schema(format!(
                "partition field '{name}' is of column '{}', which is not in the primary key \
                 ({}); a table written with updates and deletes must be partitioned by key \
                 columns, as Flink requires",
                written[column].name,
                key.join(", ")
            )));
        }
        Ok(Some(EqualityFields {
            ids: columns.iter().map(|c| written[*c].id as i32).collect(),
            schema: Arc::new(
                file_schema
                    .project(&columns)
                    .map_err(|e| IcebergError::Schema(e.to_string()))?,
            ),
            columns,
        }))
    }

    /// Commits `snapshot` on top of `base`: false when another writer committed first.
    /// In the SQL catalog, the next metadata file is written beside `base`'s and swapped
    /// in; a REST catalog applies the snapshot itself.
    pub async fn commit(&self, base: &Loaded, snapshot: Json) -> Result<bool> {
        let committed = match &self.catalog {
            Catalog::Sql(sql) => {
                let files = self.files().await?;
                let now = wall_clock();
                let next = base.metadata.with_snapshot(snapshot, &base.location, now);
                let (directory, _) = base.location.rsplit_once('/').unwrap_or_default();
                let file = format!(
                    "{directory}/{:05}-{}.metadata.json",
                    metadata_version(&base.location) + 1,
                    uuid::Uuid::new_v4()
                );
                files
                    .put(&file, next.to_bytes())
                    .await
                    .map_err(|e| self.error(e))?;
                let swapped = sql.swap(&base.location, &file).await;
                // Not after an error: the swap may have been made and its answer lost.
                if matches!(swapped, Ok(false)) {
                    files.delete(&file).await;
                }
                swapped
            }
            Catalog::Rest(rest) => rest.commit(&base.metadata, snapshot).await,
        };
        committed.map_err(|e| self.error(e))
    }
}

impl TableFiles {
    /// The object of a file under the table's location, by its full location.
    pub fn path(&self, location: &str) -> Result<Path, IcebergError> {
        let strip = |l: &str| -> String {
            let l = l.replacen("s3a://", "s3://", 1);
            match l.strip_prefix("file://") {
                Some(rest) => rest.to_string(),
                None => l.strip_prefix("file:").unwrap_or(&l).to_string(),
            }
        };
        let (base, file) = (strip(&self.base), strip(location));
        let relative = file
            .strip_prefix(base.as_str())
            .and_then(|r| r.strip_prefix('/'))
            .ok_or_else(|| {
                IcebergError::Unsupported(format!(
                    "a file outside the table's location '{}': '{location}'",
                    self.base
                ))
            })?;
        Ok(relative
            .split('/')
            .fold(self.store.path.clone(), |path, part| path.join(part)))
    }

    /// Reads a file under the table's location.
    pub async fn get(&self, location: &str) -> Result<bytes::Bytes, IcebergError> {
        let path = self.path(location)?;
        Ok(self.store.store.get(&path).await?.bytes().await?)
    }

    /// Writes a file under the table's location.
    pub async fn put(&self, location: &str, bytes: Vec<u8>) -> Result<(), IcebergError> {
        let path = self.path(location)?;
        self.store.store.put(&path, PutPayload::from(bytes)).await?;
        Ok(())
    }

    /// Deletes a file nothing refers to, if it can: one left behind is an orphan, which
    /// Iceberg's orphan-file removal deletes.
    pub async fn delete(&self, location: &str) {
        if let Ok(path) = self.path(location) {
            let _ = self.store.store.delete(&path).await;
        }
    }

    /// Rows of the sink's columns as the data files' schema has them.
    pub fn conform(&self, rows: &RecordBatch) -> Result<RecordBatch> {
        let columns = rows
            .columns()
            .iter()
            .zip(self.file_schema.fields())
            .map(
                |(column, field)| match column.data_type() == field.data_type() {
                    true => Ok(column.clone()),
                    false => cast(column, field.data_type()),
                },
            )
            .collect::<std::result::Result<Vec<_>, _>>()?;
        Ok(RecordBatch::try_new(self.file_schema.clone(), columns)?)
    }
}

/// The version number a metadata file's name starts with (`00012-….metadata.json`), or
/// 0 for a name without one.
fn metadata_version(location: &str) -> u64 {
    let name = location.rsplit('/').next().unwrap_or(location);
    let digits: String = name
        .strip_prefix('v')
        .unwrap_or(name)
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    #[test]
    fn metadata_versions_are_read_from_file_names() {
        use super::metadata_version;
        assert_eq!(
            metadata_version("s3://b/t/metadata/00012-ab.metadata.json"),
            12
        );
        assert_eq!(metadata_version("/t/metadata/v3.metadata.json"), 3);
        assert_eq!(metadata_version("/t/metadata/x.metadata.json"), 0);
    }
}
