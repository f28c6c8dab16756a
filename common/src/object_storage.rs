//! Resolves a storage location (a local path, `file:///...` or `s3://bucket/prefix`) to
//! an [`ObjectStore`] and a path inside it.

use std::sync::Arc;

use object_store::ObjectStore;
use object_store::aws::AmazonS3Builder;
use object_store::local::LocalFileSystem;
use object_store::path::Path;

use crate::{EddyError, Result};

/// A place in object storage.
#[derive(Debug, Clone)]
pub struct StorageLocation {
    /// The store.
    pub store: Arc<dyn ObjectStore>,
    /// The path inside the store.
    pub path: Path,
    /// The location as the user wrote it, for messages.
    pub display: String,
}

impl StorageLocation {
    /// How a path inside this store is shown to users: `s3://bucket/key` or `/abs/path`.
    pub fn show(&self, path: &Path) -> String {
        match self.display.strip_prefix("s3://") {
            Some(rest) => {
                let bucket = rest.split('/').next().unwrap_or(rest);
                format!("s3://{bucket}/{path}")
            }
            None => format!("/{path}"),
        }
    }
}

/// `path` with its `.` and `..` steps resolved without asking the filesystem (object
/// storage paths have no such steps).
pub fn lexically_normal(path: &std::path::Path) -> std::path::PathBuf {
    use std::path::Component;
    let mut normal = std::path::PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                normal.pop();
            }
            other => normal.push(other),
        }
    }
    normal
}

/// Resolves `location`. S3 credentials, region and endpoint come from the usual AWS
/// environment variables (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`,
/// `AWS_ENDPOINT`, `AWS_ALLOW_HTTP`) unless `s3_options` (`endpoint`, `region`,
/// `access-key-id`, `secret-access-key`, `allow-http`) set them.
pub fn resolve(location: &str, s3_options: &[(&str, &str)]) -> Result<StorageLocation> {
    let error =
        |message: String| EddyError::Config(format!("storage location '{location}': {message}"));
    if let Some(rest) = location.strip_prefix("s3://") {
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() {
            return Err(error("no bucket named".into()));
        }
        let mut builder = AmazonS3Builder::from_env().with_bucket_name(bucket);
        for (key, value) in s3_options {
            builder = match *key {
                "endpoint" => builder.with_endpoint(*value),
                "region" => builder.with_region(*value),
                "access-key-id" => builder.with_access_key_id(*value),
                "secret-access-key" => builder.with_secret_access_key(*value),
                "allow-http" => builder.with_allow_http(*value == "true"),
                other => return Err(error(format!("unknown S3 option '{other}'"))),
            };
        }
        let store = builder.build().map_err(|e| error(e.to_string()))?;
        return Ok(StorageLocation {
            store: Arc::new(store),
            path: Path::from(prefix.trim_end_matches('/')),
            display: location.to_string(),
        });
    }
    if location.contains("://") && !location.starts_with("file://") {
        return Err(error(
            "expected a local path, file:///... or s3://bucket/prefix".into(),
        ));
    }
    let local = location.strip_prefix("file://").unwrap_or(location);
    let absolute = std::path::absolute(local).map_err(|e| error(e.to_string()))?;
    let path =
        Path::from_absolute_path(lexically_normal(&absolute)).map_err(|e| error(e.to_string()))?;
    Ok(StorageLocation {
        store: Arc::new(LocalFileSystem::new()),
        path,
        display: location.to_string(),
    })
}
