//! The SQL catalog's statements on a SQLite database file (pyiceberg's
//! `SqlCatalog('…', uri='sqlite:///…')`, Iceberg's `JdbcCatalog` on `jdbc:sqlite:…`).
//! SQLite is synchronous: each call opens the file on a blocking thread, and waits for
//! another process's write lock up to [`BUSY_TIMEOUT`].

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, ErrorCode, params};

use super::sql::{CREATE_TABLES, SqlCatalog};
use crate::iceberg::IcebergError;

/// How long a statement waits for another writer's lock on the database file.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// The database file a catalog `uri` names: `jdbc:sqlite:/path`, `jdbc:sqlite:file:/path`
/// or SQLAlchemy's `sqlite:////absolute/path` and `sqlite:///relative/path`; `None` for
/// another database.
pub fn database_file(uri: &str) -> Option<PathBuf> {
    let url = uri.strip_prefix("jdbc:").unwrap_or(uri);
    let rest = url.strip_prefix("sqlite:")?;
    let path = rest
        .strip_prefix("///")
        .or_else(|| rest.strip_prefix("//"))
        .unwrap_or(rest);
    let path = path.strip_prefix("file:").unwrap_or(path);
    (!path.is_empty()).then(|| PathBuf::from(path))
}

/// The table's current metadata file, `None` when it is not registered.
pub async fn load(path: &Path, catalog: &SqlCatalog) -> Result<Option<String>, IcebergError> {
    let names = [
        catalog.catalog.clone(),
        catalog.namespace.clone(),
        catalog.table.clone(),
    ];
    blocking(path, "reading the catalog", move |connection| {
        let found = connection.query_row(
            "SELECT metadata_location FROM iceberg_tables WHERE catalog_name = ?1 \
             AND table_namespace = ?2 AND table_name = ?3",
            params![names[0], names[1], names[2]],
            |row| row.get::<_, Option<String>>(0),
        );
        match found {
            Ok(location) => Ok(location),
            Err(rusqlite::Error::QueryReturnedNoRows) => Ok(None),
            // The catalog's tables do not exist yet: no table is registered.
            Err(rusqlite::Error::SqliteFailure(_, Some(message)))
                if message.starts_with("no such table") =>
            {
                Ok(None)
            }
            Err(e) => Err(e),
        }
    })
    .await
}

/// Registers the table with its first metadata file (creating the catalog's tables and
/// the namespace when missing); false when another writer registered it first.
pub async fn register(
    path: &Path,
    catalog: &SqlCatalog,
    metadata: &str,
) -> Result<bool, IcebergError> {
    let names = [
        catalog.catalog.clone(),
        catalog.namespace.clone(),
        catalog.table.clone(),
        metadata.to_string(),
    ];
    blocking(path, "registering the table", move |connection| {
        connection.execute_batch(CREATE_TABLES)?;
        connection.execute(
            "INSERT INTO iceberg_namespace_properties VALUES (?1, ?2, 'exists', 'true') \
             ON CONFLICT DO NOTHING",
            params![names[0], names[1]],
        )?;
        let inserted = connection.execute(
            "INSERT INTO iceberg_tables VALUES (?1, ?2, ?3, ?4, NULL, 'TABLE') \
             ON CONFLICT DO NOTHING",
            params![names[0], names[1], names[2], names[3]],
        )?;
        Ok(inserted == 1)
    })
    .await
}

/// Makes `next` the table's metadata file if `current` still is.
pub async fn swap(
    path: &Path,
    catalog: &SqlCatalog,
    current: &str,
    next: &str,
) -> Result<bool, IcebergError> {
    let values = [
        next.to_string(),
        current.to_string(),
        catalog.catalog.clone(),
        catalog.namespace.clone(),
        catalog.table.clone(),
    ];
    blocking(path, "committing to the catalog", move |connection| {
        let updated = connection.execute(
            "UPDATE iceberg_tables SET metadata_location = ?1, \
             previous_metadata_location = ?2 WHERE catalog_name = ?3 \
             AND table_namespace = ?4 AND table_name = ?5 AND metadata_location = ?2",
            params![values[0], values[1], values[2], values[3], values[4]],
        )?;
        Ok(updated == 1)
    })
    .await
}

/// Runs `work` on a connection to the database file on a blocking thread; `doing` names
/// it in errors.
async fn blocking<T: Send + 'static>(
    path: &Path,
    doing: &'static str,
    work: impl FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
) -> Result<T, IcebergError> {
    let path = path.to_path_buf();
    let shown = path.display().to_string();
    let result = tokio::task::spawn_blocking(move || {
        let connection = Connection::open(&path)?;
        connection.busy_timeout(BUSY_TIMEOUT)?;
        work(&connection)
    })
    .await
    .map_err(|e| IcebergError::Catalog {
        message: format!("{doing} in SQLite database '{shown}': {e}"),
        transient: true,
    })?;
    result.map_err(|e| {
        let transient = matches!(
            e.sqlite_error_code(),
            Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)
        );
        IcebergError::Catalog {
            message: format!("{doing} in SQLite database '{shown}': {e}"),
            transient,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn database_files_are_read_from_jdbc_and_sqlalchemy_uris() {
        let file = |uri| database_file(uri).map(|p| p.display().to_string());
        assert_eq!(file("jdbc:sqlite:/var/cat.db"), Some("/var/cat.db".into()));
        assert_eq!(
            file("jdbc:sqlite:file:/var/cat.db"),
            Some("/var/cat.db".into())
        );
        assert_eq!(file("sqlite:////var/cat.db"), Some("/var/cat.db".into()));
        assert_eq!(file("sqlite:///cat.db"), Some("cat.db".into()));
        assert_eq!(file("jdbc:postgresql://h/db"), None);
        assert_eq!(file("sqlite:"), None);
    }

    #[tokio::test]
    async fn a_table_registers_once_and_swaps_only_from_its_current_metadata() {
        let directory = std::env::temp_dir().join(format!("eddy-sqlite-{}", std::process::id()));
        std::fs::create_dir_all(&directory).unwrap();
        let path = directory.join("catalog.db");
        let _ = std::fs::remove_file(&path);
        let catalog = SqlCatalog {
            database: super::super::sql::CatalogDatabase::Sqlite(path.clone()),
            catalog: "c".into(),
            namespace: "n".into(),
            table: "t".into(),
        };
        assert_eq!(catalog.load().await.unwrap(), None);
        assert!(catalog.register("m0").await.unwrap());
        assert!(!catalog.register("other").await.unwrap());
        assert_eq!(catalog.load().await.unwrap().as_deref(), Some("m0"));
        assert!(catalog.swap("m0", "m1").await.unwrap());
        assert!(!catalog.swap("m0", "m2").await.unwrap());
        assert_eq!(catalog.load().await.unwrap().as_deref(), Some("m1"));
        std::fs::write(directory.join("not-a-db"), b"garbage that is not SQLite").unwrap();
        let corrupt = SqlCatalog {
            database: super::super::sql::CatalogDatabase::Sqlite(directory.join("not-a-db")),
            ..catalog
        };
        let error = corrupt.load().await.unwrap_err().to_string();
        assert!(error.contains("not-a-db"), "{error}");
        std::fs::remove_dir_all(&directory).unwrap();
    }
}
