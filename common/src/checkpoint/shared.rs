//! Files that task snapshots share (the runs of LSM stores): each is stored once, under
//! `chk-{n}/shared/{name}` of the checkpoint that first needed it, and referred to by every
//! later snapshot that still does; retention keeps it while a retained checkpoint does.

use std::path::Path as LocalPath;

use futures::StreamExt;
use object_store::{ObjectStoreExt, PutMode, PutOptions, PutPayload, WriteMultipart};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::storage::{CheckpointDir, CheckpointStorage, StateFile, StateHandle};
use crate::state::SnapshotFile;
use crate::{EddyError, Result};

/// Files up to this size are stored in one request; larger ones in parts of this size.
const PART_BYTES: usize = 8 << 20;

impl CheckpointStorage {
    /// Stores a snapshot's file with checkpoint `checkpoint`; returns where it is for the
    /// snapshots that refer to it. Never over another file (names are unique: one there
    /// already is another attempt's).
    pub async fn store_shared(&self, checkpoint: u64, file: &SnapshotFile) -> Result<StateFile> {
        let relative = format!("shared/{}", file.name);
        let path = self.path(checkpoint, &relative);
        let mut local = tokio::fs::File::open(&file.path)
            .await
            .map_err(|e| local_error(&file.path, "open", e))?;
        let mut checksum = crc32fast::Hasher::new();
        let mut size = 0u64;
        let first = read_part(&mut local, &file.path).await?;
        checksum.update(&first);
        size += first.len() as u64;
        if first.len() < PART_BYTES {
            let create = PutOptions::from(PutMode::Create);
            match self
                .location
                .store
                .put_opts(&path, PutPayload::from(first), create)
                .await
            {
                Ok(_) => {}
                Err(object_store::Error::AlreadyExists { .. }) => {
                    return Err(EddyError::Snapshot(format!(
                        "the shared state file {} exists already: another attempt of the job wrote it",
                        self.location.show(&path)
                    )));
                }
                Err(error) => return Err(error.into()),
            }
        } else {
            let upload = self.location.store.put_multipart(&path).await?;
            let mut writer = WriteMultipart::new_with_chunk_size(upload, PART_BYTES);
            writer.put(first.into());
            loop {
                writer.wait_for_capacity(2).await?;
                let part = read_part(&mut local, &file.path).await?;
                if part.is_empty() {
                    break;
                }
                checksum.update(&part);
                size += part.len() as u64;
                writer.put(part.into());
            }
            writer.finish().await?;
        }
        if size != file.size {
            return Err(EddyError::Snapshot(format!(
                "{} changed while it was stored: {size} bytes read, {} expected",
                file.path.display(),
                file.size
            )));
        }
        Ok(StateFile {
            checkpoint,
            file: relative,
            size,
            crc32: checksum.finalize(),
        })
    }
}

impl CheckpointDir {
    /// Checks that every shared file `task` refers to is there with its recorded size.
    pub(super) async fn check_shared(&self, task: &StateHandle) -> Result<()> {
        let checks = task
            .shared
            .iter()
            .map(|file| self.check_stored(file, task, "refers to"));
        futures::future::try_join_all(checks).await?;
        Ok(())
    }

    /// Checks that `file`, which `task` extends or refers to (`how`), is there with its
    /// recorded size.
    pub(super) async fn check_stored(
        &self,
        file: &StateFile,
        task: &StateHandle,
        how: &str,
    ) -> Result<()> {
        let path = file.path(&self.chain_root);
        let found = self.location.store.head(&path).await?;
        if found.size != file.size {
            return Err(EddyError::Snapshot(format!(
                "{} is {} bytes, but task {}-{} {how} it as {} bytes",
                self.location.show(&path),
                found.size,
                task.vertex,
                task.subtask,
                file.size
            )));
        }
        Ok(())
    }

    /// Copies a shared file to `to` on local disk, checking its size and CRC-32 (written
    /// as `to` + `.partial`, renamed once whole). The file is read in ranges of
    /// [`PART_BYTES`], the next requested while one is written: a large read and a large
    /// write each, where a stream of the store's own chunks (8 KiB from a local directory)
    /// costs a blocking write per chunk.
    pub async fn download_shared(&self, file: &StateFile, to: &LocalPath) -> Result<()> {
        let path = file.path(&self.chain_root);
        let stored = self.location.store.head(&path).await?.size;
        if stored != file.size {
            return Err(EddyError::Snapshot(format!(
                "{} is {stored} bytes, expected {}",
                self.location.show(&path),
                file.size
            )));
        }
        let partial = to.with_extension("partial");
        let mut local = tokio::fs::File::create(&partial)
            .await
            .map_err(|e| local_error(&partial, "create", e))?;
        let store = &self.location.store;
        let path_ref = &path;
        let ranges = (0..file.size)
            .step_by(PART_BYTES)
            .map(|start| start..(start + PART_BYTES as u64).min(file.size));
        let mut parts = futures::stream::iter(ranges)
            .map(|range| store.get_range(path_ref, range))
            .buffered(2);
        let mut checksum = crc32fast::Hasher::new();
        while let Some(part) = parts.next().await {
            let part = part?;
            checksum.update(&part);
            local
                .write_all(&part)
                .await
                .map_err(|e| local_error(&partial, "write", e))?;
        }
        local
            .flush()
            .await
            .map_err(|e| local_error(&partial, "write", e))?;
        let crc = checksum.finalize();
        if crc != file.crc32 {
            let _ = tokio::fs::remove_file(&partial).await;
            return Err(EddyError::Snapshot(format!(
                "{} has CRC {crc:08x}, expected {:08x}",
                self.location.show(&path),
                file.crc32
            )));
        }
        tokio::fs::rename(&partial, to)
            .await
            .map_err(|e| local_error(to, "rename", e))
    }
}

/// Up to [`PART_BYTES`] of `file` (fewer only at its end).
async fn read_part(file: &mut tokio::fs::File, path: &LocalPath) -> Result<Vec<u8>> {
    let mut part = Vec::with_capacity(PART_BYTES);
    while part.len() < PART_BYTES {
        let read = (&mut *file)
            .take((PART_BYTES - part.len()) as u64)
            .read_to_end(&mut part)
            .await
            .map_err(|e| local_error(path, "read", e))?;
        if read == 0 {
            break;
        }
    }
    Ok(part)
}

fn local_error(path: &LocalPath, action: &'static str, error: std::io::Error) -> EddyError {
    EddyError::State(eddy_state::StateError::io(path, action)(error))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use bytes::Bytes;

    use super::*;
    use crate::checkpoint::CheckpointMetadata;
    use crate::object_storage::resolve;

    fn local_file(dir: &LocalPath, name: &str, bytes: &[u8]) -> SnapshotFile {
        let path = dir.join(name);
        std::fs::write(&path, bytes).unwrap();
        SnapshotFile::new(name.into(), path, bytes.len() as u64, Arc::new(()))
    }

    /// Checkpoint `n` of one task whose snapshot refers to `shared`.
    async fn commit(
        storage: &CheckpointStorage,
        n: u64,
        shared: Vec<StateFile>,
    ) -> CheckpointMetadata {
        let mut handle = storage
            .write_task(n, 0, 0, vec![Bytes::from(vec![n as u8; 4])], Vec::new())
            .await
            .unwrap();
        handle.shared = shared;
        let metadata = CheckpointMetadata::of_one_task(n, handle);
        storage.commit(&metadata).await.unwrap();
        storage.retain(1, n).await.unwrap();
        metadata
    }

    #[tokio::test]
    async fn shared_files_are_stored_once_and_kept_while_a_retained_checkpoint_refers_to_them() {
        let dir = std::env::temp_dir().join(format!("eddy-shared-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let local = dir.join("local");
        std::fs::create_dir_all(&local).unwrap();
        let storage = CheckpointStorage::new(
            &resolve(dir.join("chk").to_str().unwrap(), &[]).unwrap(),
            "job",
        );
        // A file past one part goes up in parts.
        let big: Vec<u8> = (0..PART_BYTES * 2 + 77).map(|i| (i % 251) as u8).collect();
        let a = storage
            .store_shared(1, &local_file(&local, "a.run", &big))
            .await
            .unwrap();
        let b = storage
            .store_shared(1, &local_file(&local, "b.run", b"bee"))
            .await
            .unwrap();
        commit(&storage, 1, vec![a.clone(), b.clone()]).await;
        // 2 keeps `a` (stored with 1) and adds `c`; `b` was merged away.
        let c = storage
            .store_shared(2, &local_file(&local, "c.run", b"sea"))
            .await
            .unwrap();
        let second = commit(&storage, 2, vec![a.clone(), c.clone()]).await;
        // 2 wrote its task snapshot and `c`; a restore reads `a` too.
        assert_eq!(second.size(), 4 + 3);
        assert_eq!(second.full_size(), 4 + 3 + big.len() as u64);
        assert!(
            dir.join("chk/job/chk-1/shared/a.run").exists(),
            "2 refers to it"
        );
        assert!(
            !dir.join("chk/job/chk-1/shared/b.run").exists(),
            "nothing refers to it"
        );
        assert!(!dir.join("chk/job/chk-1/_metadata").exists());

        let restored = local.join("restored.run");
        storage
            .directory(2)
            .download_shared(&a, &restored)
            .await
            .unwrap();
        assert_eq!(std::fs::read(&restored).unwrap(), big);

        // A savepoint holds copies of what its snapshots refer to.
        let savepoint = storage.save_as_savepoint(&second).await.unwrap();
        let savepoint = CheckpointDir::new(resolve(&savepoint, &[]).unwrap());
        let saved = savepoint.verified().await.unwrap();
        commit(&storage, 3, vec![c.clone()]).await;
        assert!(!dir.join("chk/job/chk-1/shared/a.run").exists());
        savepoint
            .download_shared(&saved.tasks[0].shared[0], &restored)
            .await
            .unwrap();
        assert_eq!(std::fs::read(&restored).unwrap(), big);

        // A damaged or missing file is found, never restored from.
        std::fs::write(dir.join("chk/job/chk-2/shared/c.run"), b"SEA").unwrap();
        let error = storage
            .directory(3)
            .download_shared(&c, &restored)
            .await
            .unwrap_err();
        assert!(error.to_string().contains("CRC"), "{error}");
        std::fs::write(dir.join("chk/job/chk-2/shared/c.run"), b"SE").unwrap();
        let error = storage
            .directory(3)
            .download_shared(&c, &restored)
            .await
            .unwrap_err();
        assert!(error.to_string().contains("2 bytes, expected 3"), "{error}");
        assert_eq!(
            std::fs::read(&restored).unwrap(),
            big,
            "a failed download leaves what was there"
        );
        std::fs::remove_file(dir.join("chk/job/chk-2/shared/c.run")).unwrap();
        assert!(
            storage.verified(3).await.is_err(),
            "a missing shared file fails verification"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
