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
    /// The directory the store's paths start from, when the store is the local
    /// filesystem (`/` for locations [`resolve`] makes).
    pub filesystem_root: Option<std::path::PathBuf>,
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

    /// Deletes what uploads left unfinished under `directory` (and its subdirectories
    /// when `recursive`), where the unfinished file's name passes `abandoned`; returns
    /// the names deleted.
    ///
    /// The local filesystem store writes a file as a staging file `{name}#{n}` and renames
    /// it when the upload completes, so a process killed mid-upload leaves the staging
    /// file, which the store neither lists nor deletes. `abandoned` is asked about
    /// `{name}`, and must say yes only of files no live writer still uploads. On S3 there
    /// is nothing to delete: an unfinished upload is never an object (the bucket's
    /// lifecycle rule for incomplete multipart uploads reclaims its parts).
    pub async fn delete_unfinished_uploads(
        &self,
        directory: &Path,
        recursive: bool,
        abandoned: impl Fn(&str) -> bool,
    ) -> Result<Vec<String>> {
        let Some(root) = &self.filesystem_root else {
            return Ok(Vec::new());
        };
        let start = directory
            .parts()
            .fold(root.clone(), |dir, part| dir.join(part.as_ref()));
        let staged = tokio::task::spawn_blocking(move || staging_files(&start, recursive))
            .await
            .map_err(|e| EddyError::Internal(format!("listing unfinished uploads: {e}")))??;
        let mut deleted = Vec::new();
        for (file, name) in staged {
            if !abandoned(&name) {
                continue;
            }
            match tokio::fs::remove_file(&file).await {
                Ok(()) => deleted.push(file.display().to_string()),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(filesystem_error("deleting", &file, e)),
            }
        }
        Ok(deleted)
    }
}

/// The staging files (`{name}#{digits}`) in `directory` (and below it when `recursive`),
/// each with the `{name}` it stages; none when the directory does not exist.
fn staging_files(
    directory: &std::path::Path,
    recursive: bool,
) -> Result<Vec<(std::path::PathBuf, String)>> {
    let entries = match std::fs::read_dir(directory) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(filesystem_error("listing", directory, e)),
    };
    let mut staged = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| filesystem_error("listing", directory, e))?;
        let path = entry.path();
        let file_type = entry
            .file_type()
            .map_err(|e| filesystem_error("reading", &path, e))?;
        if file_type.is_dir() {
            if recursive {
                staged.extend(staging_files(&path, true)?);
            }
            continue;
        }
        let file_name = entry.file_name();
        let Some((name, suffix)) = file_name.to_str().and_then(|n| n.rsplit_once('#')) else {
            continue;
        };
        if !suffix.is_empty() && suffix.bytes().all(|b| b.is_ascii_digit()) {
            staged.push((path.clone(), name.to_string()));
        }
    }
    Ok(staged)
}

/// A local filesystem request that failed, naming the path.
fn filesystem_error(doing: &str, path: &std::path::Path, error: std::io::Error) -> EddyError {
    EddyError::External {
        system: "local filesystem",
        message: format!("{doing} '{}': {error}", path.display()),
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
            filesystem_root: None,
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
        filesystem_root: Some(std::path::PathBuf::from("/")),
    })
}
