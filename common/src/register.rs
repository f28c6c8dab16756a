//! A compare-and-set register in object storage, built only of create-if-absent puts
//! (`PutMode::Create`), which every store Eddy supports can do (S3's `If-None-Match`, a
//! hard link on a local file system; `PutMode::Update` has no local implementation).
//!
//! Version `n` of the register is the object `{dir}/{n:020}`; writing version `n + 1` is
//! creating that object, which exactly one writer can do. The newest version is the
//! highest name listed. Old versions are deleted by the writer that superseded them,
//! keeping a few so that a reader that listed before a deletion still finds its object; a
//! write that re-created a deleted version (its writer slept through the versions after
//! it) sees a newer one when it lists after creating, and counts as lost.
//!
//! The JobManagers' leader lease and each job's commit log are such registers.

use bytes::Bytes;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};
use std::sync::Arc;

use crate::Result;

/// High availability's fencing rule for registers whose versions carry their writer's
/// leader term: a writer of `term` may not write over a version written in a later term,
/// unless its term is 0 (a JobManager without high availability, alone by definition).
pub fn fenced_by(term: u64, written_in: u64) -> bool {
    term != 0 && written_in > term
}

/// Versions kept behind the newest one.
const KEPT: u64 = 3;

/// How often a read retries when the version it listed was deleted under it.
const READ_ATTEMPTS: usize = 5;

/// A register's value at one version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Versioned {
    /// The version (1 for the first write).
    pub version: u64,
    /// What that write stored.
    pub value: Bytes,
}

/// A compare-and-set register under one directory of a store.
#[derive(Debug, Clone)]
pub struct Register {
    store: Arc<dyn ObjectStore>,
    dir: Path,
}

impl Register {
    /// The register kept under `dir`.
    pub fn new(store: Arc<dyn ObjectStore>, dir: Path) -> Self {
        Register { store, dir }
    }

    fn path(&self, version: u64) -> Path {
        self.dir.clone().join(format!("{version:020}").as_str())
    }

    /// The versions present, ascending.
    async fn versions(&self) -> Result<Vec<u64>> {
        let listing = self.store.list_with_delimiter(Some(&self.dir)).await?;
        let mut versions: Vec<u64> = listing
            .objects
            .iter()
            .filter_map(|o| o.location.filename()?.parse().ok())
            .collect();
        versions.sort_unstable();
        Ok(versions)
    }

    /// The newest value, or `None` when the register was never written.
    pub async fn read(&self) -> Result<Option<Versioned>> {
        for _ in 0..READ_ATTEMPTS {
            let Some(version) = self.versions().await?.last().copied() else {
                return Ok(None);
            };
            match self.store.get(&self.path(version)).await {
                Ok(found) => {
                    let value = found.bytes().await?;
                    return Ok(Some(Versioned { version, value }));
                }
                // Superseded and deleted between the listing and the read: list again.
                Err(object_store::Error::NotFound { .. }) => continue,
                Err(error) => return Err(error.into()),
            }
        }
        Err(crate::EddyError::Internal(format!(
            "the register {} changes faster than it can be read",
            self.dir
        )))
    }

    /// Writes `value` as the version after `after` (0: the first write); `false` when
    /// another writer wrote that version first (the caller's view is stale).
    pub async fn write(&self, after: u64, value: Bytes) -> Result<bool> {
        let version = after + 1;
        let create = PutOptions::from(PutMode::Create);
        match self
            .store
            .put_opts(&self.path(version), PutPayload::from(value), create)
            .await
        {
            Ok(_) => {}
            Err(object_store::Error::AlreadyExists { .. }) => return Ok(false),
            Err(error) => return Err(error.into()),
        }
        // A writer that slept through many versions can create one that was superseded
        // and then deleted: a newer version standing means its write came too late.
        if self
            .versions()
            .await?
            .last()
            .is_some_and(|newest| *newest > version)
        {
            let _ = self.store.delete(&self.path(version)).await;
            return Ok(false);
        }
        if let Some(old) = version.checked_sub(KEPT + 1)
            && let Err(error) = self.store.delete(&self.path(old)).await
            && !matches!(error, object_store::Error::NotFound { .. })
        {
            tracing::debug!(%error, register = %self.dir, version = old, "an old register version stays");
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use object_store::local::LocalFileSystem;

    fn register(name: &str) -> (Register, std::path::PathBuf) {
        let dir = std::env::temp_dir().join(format!("eddy-register-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let store = LocalFileSystem::new_with_prefix(&dir).unwrap();
        (Register::new(Arc::new(store), Path::from("lease")), dir)
    }

    #[tokio::test]
    async fn a_write_succeeds_only_over_the_version_it_read() {
        let (register, dir) = register("cas");
        assert_eq!(register.read().await.unwrap(), None);
        assert!(register.write(0, Bytes::from("a")).await.unwrap());
        assert!(!register.write(0, Bytes::from("b")).await.unwrap(), "stale");
        let read = register.read().await.unwrap().unwrap();
        assert_eq!((read.version, read.value), (1, Bytes::from("a")));
        for (after, value) in (1..10).zip(["c", "d", "e", "f", "g", "h", "i", "j", "k"]) {
            assert!(register.write(after, Bytes::from(value)).await.unwrap());
        }
        let read = register.read().await.unwrap().unwrap();
        assert_eq!((read.version, read.value), (10, Bytes::from("k")));
        assert_eq!(register.versions().await.unwrap(), vec![7, 8, 9, 10]);
        let _ = std::fs::remove_dir_all(dir);
    }

    #[tokio::test]
    async fn a_writer_that_slept_cannot_recreate_a_deleted_version() {
        let (register, dir) = register("aba");
        for after in 0..10 {
            assert!(register.write(after, Bytes::from("new")).await.unwrap());
        }
        // Version 2 was deleted; a writer that read version 1 long ago writes now.
        assert!(!register.write(1, Bytes::from("stale")).await.unwrap());
        let read = register.read().await.unwrap().unwrap();
        assert_eq!((read.version, read.value), (10, Bytes::from("new")));
        assert_eq!(register.versions().await.unwrap(), vec![7, 8, 9, 10]);
        let _ = std::fs::remove_dir_all(dir);
    }

    #[tokio::test]
    async fn of_concurrent_writers_of_one_version_exactly_one_wins() {
        let (register, dir) = register("race");
        for after in 0..20 {
            let writers = (0..8).map(|w| {
                let register = register.clone();
                tokio::spawn(
                    async move { register.write(after, Bytes::from(format!("{w}"))).await },
                )
            });
            let won: Vec<bool> = futures::future::join_all(writers)
                .await
                .into_iter()
                .map(|r| r.unwrap().unwrap())
                .collect();
            assert_eq!(
                won.iter().filter(|w| **w).count(),
                1,
                "version {}",
                after + 1
            );
        }
        assert_eq!(register.read().await.unwrap().unwrap().version, 20);
        let _ = std::fs::remove_dir_all(dir);
    }
}
