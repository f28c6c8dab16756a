//! Sorted runs: immutable files of keys in order, each with its deletions, a block index
//! and a Bloom filter. A run is written once ([`RunWriter`]) and then only read ([`Run`]),
//! so a checkpoint can share it with later checkpoints by name.

mod block;
mod bloom;
mod format;
mod varint;
mod writer;

use std::cell::RefCell;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

pub use writer::RunWriter;

use crate::cache::BlockCache;
use crate::error::{Result, StateError};
use format::{FOOTER_LEN, Footer};

/// What a finished run holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunMeta {
    /// Its file.
    pub path: PathBuf,
    /// Its size in bytes.
    pub bytes: u64,
    /// Entries, deletions included.
    pub entries: u64,
    /// Entries that record a deletion.
    pub deletions: u64,
}

/// What a run says of a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup {
    /// The run holds this value for it.
    Found(Vec<u8>),
    /// The run records that it was deleted: older runs must not be asked.
    Deleted,
    /// The run knows nothing of it: ask an older run.
    Absent,
}

/// A data block's place in the file (its last key is in `Run::last_keys`).
#[derive(Debug)]
struct BlockHandle {
    offset: u64,
    len: u64,
}

/// An open run file: its index and filter in memory, its blocks read on demand.
#[derive(Debug)]
pub struct Run {
    /// Unique in the process: names its blocks in a block cache.
    id: u64,
    meta: RunMeta,
    file: File,
    blocks: Vec<BlockHandle>,
    /// The last key of every block, back to back; `last_key_ends[i]` ends block `i`'s.
    last_keys: Vec<u8>,
    last_key_ends: Vec<usize>,
    bloom: Vec<u8>,
    /// Remove the file once the last holder drops the run.
    retired: AtomicBool,
}

impl Run {
    /// Opens the run at `path`, reading and checking its footer, index and filter.
    pub fn open(path: impl Into<PathBuf>) -> Result<Run> {
        let path = path.into();
        let file = File::open(&path).map_err(StateError::io(&path, "open"))?;
        let len = file
            .metadata()
            .map_err(StateError::io(&path, "stat"))?
            .len();
        if len < FOOTER_LEN as u64 {
            return Err(StateError::corrupt(
                &path,
                format!("{len} bytes: shorter than a footer"),
            ));
        }
        let mut footer = [0u8; FOOTER_LEN];
        read_at(&file, &path, &mut footer, len - FOOTER_LEN as u64)?;
        let footer = Footer::decode(&footer, len, &path)?;
        let index = read_span(&file, &path, footer.index.offset, footer.index.len)?;
        let bloom = read_span(&file, &path, footer.bloom.offset, footer.bloom.len)?;
        let bloom = format::checked(&bloom, "bloom filter", &path)?.to_vec();
        static NEXT_ID: AtomicU64 = AtomicU64::new(1);
        let mut run = Run {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            meta: RunMeta {
                path,
                bytes: len,
                entries: footer.entries,
                deletions: footer.deletions,
            },
            file,
            blocks: Vec::new(),
            last_keys: Vec::new(),
            last_key_ends: Vec::new(),
            bloom,
            retired: AtomicBool::new(false),
        };
        run.read_index(&index, footer.index.offset)?;
        Ok(run)
    }

    fn read_index(&mut self, index: &[u8], data_end: u64) -> Result<()> {
        let path = self.meta.path.clone();
        let content = format::checked(index, "index", &path)?;
        let corrupt = || StateError::corrupt(&path, "index entry runs past the index");
        let mut pos = 0;
        let count = varint::get(content, &mut pos).ok_or_else(corrupt)?;
        for _ in 0..count {
            let offset = varint::get(content, &mut pos).ok_or_else(corrupt)?;
            let len = varint::get(content, &mut pos).ok_or_else(corrupt)?;
            let key_len = varint::get(content, &mut pos).ok_or_else(corrupt)? as usize;
            let key = content
                .get(pos..pos.saturating_add(key_len))
                .ok_or_else(corrupt)?;
            pos += key_len;
            if offset.checked_add(len).is_none_or(|end| end > data_end) {
                return Err(StateError::corrupt(&path, "a block lies outside the data"));
            }
            self.blocks.push(BlockHandle { offset, len });
            self.last_keys.extend_from_slice(key);
            self.last_key_ends.push(self.last_keys.len());
        }
        Ok(())
    }

    /// What it holds.
    pub fn meta(&self) -> &RunMeta {
        &self.meta
    }

    /// Its file's name: unique among the runs of every store (it names the run in
    /// checkpoints).
    pub fn name(&self) -> &str {
        self.meta
            .path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
    }

    /// No store needs the run any more: its file goes once the last holder (a checkpoint
    /// still uploading it, say) drops it.
    pub fn retire(&self) {
        self.retired.store(true, Ordering::Relaxed);
    }

    /// Its largest key (`None` for a run of no block).
    pub fn max_key(&self) -> Option<&[u8]> {
        self.blocks
            .len()
            .checked_sub(1)
            .map(|last| self.last_key(last))
    }

    fn last_key(&self, block: usize) -> &[u8] {
        let start = match block {
            0 => 0,
            i => self.last_key_ends[i - 1],
        };
        &self.last_keys[start..self.last_key_ends[block]]
    }

    /// The first block that may hold `key` or a greater one.
    fn block_for(&self, key: &[u8]) -> usize {
        let (mut low, mut high) = (0, self.blocks.len());
        while low < high {
            let mid = (low + high) / 2;
            if self.last_key(mid) < key {
                low = mid + 1;
            } else {
                high = mid;
            }
        }
        low
    }

    /// Block `i`'s content, its CRC checked.
    fn read_block(&self, i: usize) -> Result<Vec<u8>> {
        let handle = &self.blocks[i];
        let mut bytes = read_span(&self.file, &self.meta.path, handle.offset, handle.len)?;
        format::checked(&bytes, "data block", &self.meta.path)?;
        bytes.truncate(bytes.len() - 4);
        Ok(bytes)
    }

    /// Block `i`'s content from `cache`, read into it if missing.
    fn cached_block(&self, i: usize, cache: &RefCell<BlockCache>) -> Result<Arc<[u8]>> {
        let id = (self.id, i as u32);
        if let Some(block) = cache.borrow_mut().get(id) {
            return Ok(block);
        }
        let block: Arc<[u8]> = self.read_block(i)?.into();
        cache.borrow_mut().insert(id, Arc::clone(&block));
        Ok(block)
    }

    /// The block that holds `key` if the run holds it; `None` when the filter or the
    /// index says it does not.
    fn locate(&self, key: &[u8]) -> Option<usize> {
        if !bloom::may_contain(&self.bloom, bloom::hash(key)) {
            return None;
        }
        Some(self.block_for(key)).filter(|i| *i < self.blocks.len())
    }

    /// What the run says of `key`, its blocks read through `cache`.
    pub(crate) fn get_cached(&self, key: &[u8], cache: &RefCell<BlockCache>) -> Result<Lookup> {
        match self.locate(key) {
            Some(i) => self.find(&self.cached_block(i, cache)?, key),
            None => Ok(Lookup::Absent),
        }
    }

    /// What `block` says of `key`.
    fn find(&self, block: &[u8], key: &[u8]) -> Result<Lookup> {
        for entry in block::BlockView::new(block, &self.meta.path)?.seek(key)? {
            let (found, value) = entry?;
            if found == key {
                return Ok(value.map_or(Lookup::Deleted, |v| Lookup::Found(v.to_vec())));
            }
            if found > key {
                break;
            }
        }
        Ok(Lookup::Absent)
    }

    /// What the run says of `key` (its block read from the file).
    pub fn get(&self, key: &[u8]) -> Result<Lookup> {
        match self.locate(key) {
            Some(i) => self.find(&self.read_block(i)?, key),
            None => Ok(Lookup::Absent),
        }
    }

    /// Its entries with keys at or after `start`, in key order.
    pub fn entries_from(&self, start: &[u8]) -> RunEntries<'_> {
        RunEntries {
            run: self,
            next_block: self.block_for(start),
            start: start.to_vec(),
            buffered: Vec::new(),
            at: 0,
            failed: false,
        }
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        if *self.retired.get_mut() {
            let _ = std::fs::remove_file(&self.meta.path);
        }
    }
}

/// An entry of a run or store: a key and its value (`None`: a deletion).
pub type Entry = (Vec<u8>, Option<Vec<u8>>);

/// A run's entries in key order, read a block at a time.
pub struct RunEntries<'a> {
    run: &'a Run,
    next_block: usize,
    start: Vec<u8>,
    buffered: Vec<Entry>,
    at: usize,
    failed: bool,
}

impl RunEntries<'_> {
    fn fill(&mut self) -> Result<()> {
        let block = self.run.read_block(self.next_block)?;
        self.next_block += 1;
        self.buffered.clear();
        self.at = 0;
        for entry in block::BlockView::new(&block, &self.run.meta.path)?.entries() {
            let (key, value) = entry?;
            if key >= self.start.as_slice() {
                self.buffered
                    .push((key.to_vec(), value.map(<[u8]>::to_vec)));
            }
        }
        Ok(())
    }
}

impl Iterator for RunEntries<'_> {
    type Item = Result<Entry>;

    fn next(&mut self) -> Option<Self::Item> {
        while !self.failed && self.at == self.buffered.len() {
            if self.next_block == self.run.blocks.len() {
                return None;
            }
            if let Err(error) = self.fill() {
                self.failed = true;
                return Some(Err(error));
            }
        }
        if self.failed {
            return None;
        }
        self.at += 1;
        Some(Ok(std::mem::take(&mut self.buffered[self.at - 1])))
    }
}

fn read_at(file: &File, path: &Path, into: &mut [u8], offset: u64) -> Result<()> {
    file.read_exact_at(into, offset)
        .map_err(StateError::io(path, "read"))
}

fn read_span(file: &File, path: &Path, offset: u64, len: u64) -> Result<Vec<u8>> {
    let mut bytes = vec![0u8; len as usize];
    read_at(file, path, &mut bytes, offset)?;
    Ok(bytes)
}

#[cfg(test)]
pub(crate) mod tests;
