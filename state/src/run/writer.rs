//! Writing a run: entries in strictly increasing key order, into a file that appears
//! under its name only once it is whole.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;

use super::block::BlockBuilder;
use super::format::{self, BLOCK_BYTES, Footer, Span};
use super::{RunMeta, bloom, varint};
use crate::error::{Result, StateError};

/// Writes one run file.
pub struct RunWriter {
    path: PathBuf,
    partial: PathBuf,
    file: BufWriter<File>,
    /// The block being filled.
    block: BlockBuilder,
    /// Index entries of the blocks written.
    index: Vec<u8>,
    blocks: u64,
    offset: u64,
    last_key: Vec<u8>,
    hashes: Vec<u64>,
    deletions: u64,
}

impl RunWriter {
    /// Starts a run to be named `path` (written as `path` + `.partial` until finished).
    pub fn create(path: impl Into<PathBuf>) -> Result<Self> {
        let path = path.into();
        let mut partial = path.clone().into_os_string();
        partial.push(".partial");
        let partial = PathBuf::from(partial);
        let file = File::create(&partial).map_err(StateError::io(&partial, "create"))?;
        Ok(RunWriter {
            path,
            partial,
            file: BufWriter::with_capacity(64 * 1024, file),
            block: BlockBuilder::default(),
            index: Vec::new(),
            blocks: 0,
            offset: 0,
            last_key: Vec::new(),
            hashes: Vec::new(),
            deletions: 0,
        })
    }

    /// Adds an entry; `value` `None` records that `key` was deleted (it hides the key in
    /// older runs). Keys must strictly increase.
    pub fn add(&mut self, key: &[u8], value: Option<&[u8]>) -> Result<()> {
        if !self.hashes.is_empty() && key <= self.last_key.as_slice() {
            return Err(StateError::Misuse(format!(
                "run {}: key {key:02x?} added after {:02x?}",
                self.path.display(),
                self.last_key
            )));
        }
        self.block.add(key, value);
        self.hashes.push(bloom::hash(key));
        self.deletions += u64::from(value.is_none());
        self.last_key.clear();
        self.last_key.extend_from_slice(key);
        if self.block.len() >= BLOCK_BYTES {
            self.close_block()?;
        }
        Ok(())
    }

    /// Entries added so far.
    pub fn entries(&self) -> u64 {
        self.hashes.len() as u64
    }

    /// Bytes written so far (a lower bound of the file's size).
    pub fn bytes_written(&self) -> u64 {
        self.offset + self.block.len() as u64
    }

    fn close_block(&mut self) -> Result<()> {
        if self.block.is_empty() {
            return Ok(());
        }
        let mut block = self.block.finish();
        format::seal(&mut block);
        varint::put(&mut self.index, self.offset);
        varint::put(&mut self.index, block.len() as u64);
        varint::put(&mut self.index, self.last_key.len() as u64);
        self.index.extend_from_slice(&self.last_key);
        self.blocks += 1;
        self.write(&block)?;
        self.block.reuse(block);
        Ok(())
    }

    fn write(&mut self, bytes: &[u8]) -> Result<()> {
        self.file
            .write_all(bytes)
            .map_err(StateError::io(&self.partial, "write"))?;
        self.offset += bytes.len() as u64;
        Ok(())
    }

    /// Writes index, filter and footer and gives the file its name. Local run files are
    /// not synced: after a crash the state is restored from a checkpoint, never from them.
    pub fn finish(mut self) -> Result<RunMeta> {
        self.close_block()?;
        let mut index = Vec::with_capacity(self.index.len() + 14);
        varint::put(&mut index, self.blocks);
        index.extend_from_slice(&self.index);
        format::seal(&mut index);
        let index_span = Span {
            offset: self.offset,
            len: index.len() as u64,
        };
        self.write(&index)?;
        let mut filter = bloom::build(&self.hashes);
        format::seal(&mut filter);
        let bloom_span = Span {
            offset: self.offset,
            len: filter.len() as u64,
        };
        self.write(&filter)?;
        let footer = Footer {
            index: index_span,
            bloom: bloom_span,
            entries: self.entries(),
            deletions: self.deletions,
        };
        self.write(&footer.encode())?;
        self.file
            .flush()
            .map_err(StateError::io(&self.partial, "write"))?;
        std::fs::rename(&self.partial, &self.path).map_err(StateError::io(&self.path, "rename"))?;
        Ok(RunMeta {
            path: std::mem::take(&mut self.path),
            bytes: self.offset,
            entries: footer.entries,
            deletions: self.deletions,
        })
    }
}

impl Drop for RunWriter {
    fn drop(&mut self) {
        // An unfinished run leaves nothing behind (a finished one was renamed away).
        let _ = std::fs::remove_file(&self.partial);
    }
}
