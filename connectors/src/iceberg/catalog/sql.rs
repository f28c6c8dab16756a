//! The SQL catalog (Iceberg's `JdbcCatalog`, pyiceberg's `SqlCatalog`) on PostgreSQL or
//! SQLite: a table's current metadata file is a row of `iceberg_tables`, and a commit
//! swaps it with a compare-and-set `UPDATE`, so concurrent writers (other sink subtasks,
//! other engines) serialize their commits.

use std::path::PathBuf;

use tokio_postgres::Client;
use tokio_postgres::error::SqlState;

use super::sqlite;
use crate::iceberg::IcebergError;
use crate::postgres::{connect_with, error_detail};

/// The database the catalog's tables are in.
#[derive(Debug, Clone)]
pub enum CatalogDatabase {
    /// A PostgreSQL server.
    Postgres(Box<tokio_postgres::Config>),
    /// A SQLite database file, shared by the processes that open it.
    Sqlite(PathBuf),
}

/// Where a table is registered.
#[derive(Debug, Clone)]
pub struct SqlCatalog {
    /// The catalog's database.
    pub database: CatalogDatabase,
    /// `catalog-name`: the catalog's rows in the shared tables.
    pub catalog: String,
    /// The table's namespace (`catalog-database`).
    pub namespace: String,
    /// The table's name in the catalog (`catalog-table`).
    pub table: String,
}

/// The catalog's tables, as pyiceberg and Iceberg's `JdbcCatalog` create them.
pub(super) const CREATE_TABLES: &str = "CREATE TABLE IF NOT EXISTS iceberg_tables (
    catalog_name VARCHAR(255) NOT NULL,
    table_namespace VARCHAR(255) NOT NULL,
    table_name VARCHAR(255) NOT NULL,
    metadata_location VARCHAR(1000),
    previous_metadata_location VARCHAR(1000),
    iceberg_type VARCHAR(5),
    PRIMARY KEY (catalog_name, table_namespace, table_name));
CREATE TABLE IF NOT EXISTS iceberg_namespace_properties (
    catalog_name VARCHAR(255) NOT NULL,
    namespace VARCHAR(255) NOT NULL,
    property_key VARCHAR(255) NOT NULL,
    property_value VARCHAR(1000),
    PRIMARY KEY (catalog_name, namespace, property_key));";

impl SqlCatalog {
    /// The table's current metadata file, `None` when the table is not registered.
    pub async fn load(&self) -> Result<Option<String>, IcebergError> {
        let config = match &self.database {
            CatalogDatabase::Sqlite(path) => return sqlite::load(path, self).await,
            CatalogDatabase::Postgres(config) => config,
        };
        let client = self.connect(config).await?;
        let rows = client
            .query(
                "SELECT metadata_location FROM iceberg_tables WHERE catalog_name = $1 \
                 AND table_namespace = $2 AND table_name = $3",
                &[&self.catalog, &self.namespace, &self.table],
            )
            .await;
        match rows {
            Ok(rows) => Ok(rows.first().and_then(|row| row.get(0))),
            // The catalog's tables do not exist yet: no table is registered.
            Err(e) if e.code() == Some(&tokio_postgres::error::SqlState::UNDEFINED_TABLE) => {
                Ok(None)
            }
            Err(e) => Err(catalog_error("reading the catalog", &e)),
        }
    }

    /// Registers the table with its first metadata file, creating the catalog's tables
    /// and the namespace if they are missing; false when another writer registered it first.
    pub async fn register(&self, metadata: &str) -> Result<bool, IcebergError> {
        let config = match &self.database {
            CatalogDatabase::Sqlite(path) => return sqlite::register(path, self, metadata).await,
            CatalogDatabase::Postgres(config) => config,
        };
        let client = self.connect(config).await?;
        create_catalog_tables(&client).await?;
        client
            .execute(
                "INSERT INTO iceberg_namespace_properties VALUES ($1, $2, 'exists', 'true') \
                 ON CONFLICT DO NOTHING",
                &[&self.catalog, &self.namespace],
            )
            .await
            .map_err(|e| catalog_error("creating the namespace", &e))?;
        let inserted = client
            .execute(
                "INSERT INTO iceberg_tables VALUES ($1, $2, $3, $4, NULL, 'TABLE') \
                 ON CONFLICT DO NOTHING",
                &[&self.catalog, &self.namespace, &self.table, &metadata],
            )
            .await
            .map_err(|e| catalog_error("registering the table", &e))?;
        Ok(inserted == 1)
    }

    /// Makes `next` the table's metadata file if `current` still is; false when another
    /// writer committed in between.
    pub async fn swap(&self, current: &str, next: &str) -> Result<bool, IcebergError> {
        let config = match &self.database {
            CatalogDatabase::Sqlite(path) => return sqlite::swap(path, self, current, next).await,
            CatalogDatabase::Postgres(config) => config,
        };
        let client = self.connect(config).await?;
        let updated = client
            .execute(
                "UPDATE iceberg_tables SET metadata_location = $1, \
                 previous_metadata_location = $2 WHERE catalog_name = $3 \
                 AND table_namespace = $4 AND table_name = $5 AND metadata_location = $2",
                &[&next, &current, &self.catalog, &self.namespace, &self.table],
            )
            .await
            .map_err(|e| catalog_error("committing to the catalog", &e))?;
        Ok(updated == 1)
    }

    async fn connect(&self, config: &tokio_postgres::Config) -> Result<Client, IcebergError> {
        connect_with(config, &self.table)
            .await
            .map_err(|e| catalog_error("connecting to the catalog", &e))
    }
}

/// Creates the catalog's tables where they are missing. PostgreSQL's `CREATE TABLE IF NOT
/// EXISTS` races with itself: of writers creating the same table at once (a sink's
/// subtasks, writing to a new catalog), all but one fail on a unique index of the system
/// catalog; each of those tries again, and then finds the table.
async fn create_catalog_tables(client: &Client) -> Result<(), IcebergError> {
    const TRIES: u32 = 5;
    let lost_race = |e: &tokio_postgres::Error| {
        e.code().is_some_and(|code| {
            [
                SqlState::UNIQUE_VIOLATION,
                SqlState::DUPLICATE_TABLE,
                SqlState::DUPLICATE_OBJECT,
            ]
            .contains(code)
        })
    };
    let mut tried = 0;
    loop {
        tried += 1;
        match client.batch_execute(CREATE_TABLES).await {
            Ok(()) => return Ok(()),
            Err(e) if tried < TRIES && lost_race(&e) => {
                tokio::time::sleep(std::time::Duration::from_millis(20 * u64::from(tried))).await;
            }
            Err(e) => return Err(catalog_error("creating the catalog's tables", &e)),
        }
    }
}

fn catalog_error(doing: &str, e: &tokio_postgres::Error) -> IcebergError {
    let (detail, transient) = error_detail(e);
    IcebergError::Catalog {
        message: format!("{doing}: {detail}"),
        transient,
    }
}
