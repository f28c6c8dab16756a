//! A store: a memtable of recent writes over sorted runs on local disk, newest first. Writes
//! go to the memtable; past its budget it is written out as a run. Runs are merged in tiers
//! so that a key is looked up in few of them and a deleted key's space comes back. A merge
//! writes at most a set number of bytes per flush: a large one goes on over later flushes,
//! a fragment at a time, so neither the pause it causes nor what the next checkpoint
//! uploads grows with the state.

mod memtable;
mod merging;

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::cache::BlockCache;
use crate::error::{Result, StateError};
use crate::merge::{Merged, Source};
use crate::run::{Entry, Lookup, Run, RunWriter};
use crate::sorted_run::{SortedRun, group_fragments};
use memtable::Memtable;
use merging::Merging;

/// How a store uses memory and merges runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreOptions {
    /// Bytes of keys and values the memtable holds before it is written as a run.
    pub memtable_bytes: usize,
    /// Runs of one tier merged at a time; a tier holds runs up to `fan_in` times the size
    /// of the one below.
    pub fan_in: usize,
    /// Past this many runs the newest `fan_in` are merged whatever their tiers; a merge
    /// under way is paced to be done before this many have piled up on it.
    pub max_runs: usize,
    /// Bytes of data blocks kept in memory after a read.
    pub block_cache_bytes: usize,
    /// Bytes merges may write for each memtable written out (more only to keep within
    /// `max_runs`); a merge that needs more goes on at the next flush. It also bounds the
    /// size of a merge's files.
    pub merge_bytes_per_flush: usize,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            memtable_bytes: 64 << 20,
            fan_in: 4,
            max_runs: 24,
            block_cache_bytes: 64 << 20,
            merge_bytes_per_flush: 512 << 20,
        }
    }
}

/// One subtask's keyed state: a memtable over immutable runs in a directory it owns.
#[derive(Debug)]
pub struct Store {
    dir: PathBuf,
    options: StoreOptions,
    /// Hash tables by key prefix: a write is a hash-table insert, a scan sorts the
    /// prefixes it spans.
    memtable: Memtable,
    /// Newest first.
    runs: Vec<SortedRun>,
    /// The merge under way, if one is.
    merging: Option<Merging>,
    /// A checkpoint wrote a run and left its merges to the next write.
    merges_owed: bool,
    /// Starts the name of every run this store writes: unique to the store, so that a
    /// run's file name names it in checkpoints of every attempt of a job.
    run_prefix: String,
    next_run: u64,
    stats: StoreStats,
    cache: RefCell<BlockCache>,
}

/// What a store has written to disk since it was created.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StoreStats {
    /// Bytes of runs written from the memtable.
    pub flushed_bytes: u64,
    /// Bytes of runs written by merges.
    pub merged_bytes: u64,
    /// Merges done.
    pub merges: u64,
}

impl Store {
    /// An empty store writing its runs into `dir` (created if missing). The directory is
    /// the store's alone: run files already there are not read.
    pub fn create(dir: impl Into<PathBuf>, options: StoreOptions) -> Result<Store> {
        let dir = dir.into();
        std::fs::create_dir_all(&dir).map_err(StateError::io(&dir, "create directory"))?;
        if options.fan_in < 2 || options.max_runs < options.fan_in {
            return Err(StateError::Misuse(format!(
                "fan_in {} must be at least 2 and at most max_runs {}",
                options.fan_in, options.max_runs
            )));
        }
        if options.merge_bytes_per_flush == 0 {
            return Err(StateError::Misuse(
                "merge_bytes_per_flush must be positive".into(),
            ));
        }
        Ok(Store {
            dir,
            options,
            memtable: Memtable::default(),
            runs: Vec::new(),
            merging: None,
            merges_owed: false,
            run_prefix: unique_prefix(),
            next_run: 1,
            stats: StoreStats::default(),
            cache: RefCell::new(BlockCache::new(options.block_cache_bytes)),
        })
    }

    /// A store over runs written earlier (restored from a checkpoint), given newest first
    /// as [`Store::checkpoint`] lists them, writing its new runs into `dir`. The runs become
    /// the store's: merging them away deletes their files.
    pub fn open(
        dir: impl Into<PathBuf>,
        options: StoreOptions,
        runs: impl IntoIterator<Item = PathBuf>,
    ) -> Result<Store> {
        let mut store = Store::create(dir, options)?;
        let runs = runs
            .into_iter()
            .map(|path| Run::open(path).map(Arc::new))
            .collect::<Result<Vec<_>>>()?;
        store.runs = group_fragments(runs);
        Ok(store)
    }

    /// Sets `key` to `value`.
    pub fn put(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        self.write(key, Some(value))
    }

    /// Deletes `key`.
    pub fn delete(&mut self, key: &[u8]) -> Result<()> {
        if self.runs.is_empty() {
            // No run can hold it: nothing needs hiding.
            self.memtable.remove(key);
            return Ok(());
        }
        self.write(key, None)
    }

    fn write(&mut self, key: &[u8], value: Option<&[u8]>) -> Result<()> {
        if std::mem::take(&mut self.merges_owed) {
            self.compact()?;
        }
        self.memtable.insert(key, value);
        if self.memtable.bytes() >= self.options.memtable_bytes {
            self.flush()?;
        }
        Ok(())
    }

    /// The value of `key`, if it has one.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        if let Some(value) = self.memtable.get(key) {
            return Ok(value.clone());
        }
        for run in &self.runs {
            match run.get_cached(key, &self.cache)? {
                Lookup::Found(value) => return Ok(Some(value)),
                Lookup::Deleted => return Ok(None),
                Lookup::Absent => {}
            }
        }
        Ok(None)
    }

    /// Every key at or after `start` with its value, in key order.
    pub fn entries_from<'a>(
        &'a self,
        start: &[u8],
    ) -> Result<impl Iterator<Item = Result<Entry>> + use<'a>> {
        self.entries_between(start, None)
    }

    /// Every key from `start` up to `end` (excluded; `None`: to the last) with its value,
    /// in key order. Only the memtable's keys in the range are copied, and only the
    /// prefixes (key groups and tables) the range spans are looked at, so that a narrow
    /// scan stays cheap beside a full memtable.
    pub fn entries_between<'a>(
        &'a self,
        start: &[u8],
        end: Option<&[u8]>,
    ) -> Result<impl Iterator<Item = Result<Entry>> + use<'a>> {
        let memtable = self.memtable.range(start, end).into_iter().map(Ok);
        let mut sources: Vec<Source<'a>> = vec![Box::new(memtable)];
        for run in &self.runs {
            sources.push(Box::new(run.entries_from(start)));
        }
        let end = end.map(<[u8]>::to_vec);
        Ok(
            Merged::new(sources, true)?.take_while(move |entry| match (entry, &end) {
                (Ok((key, _)), Some(end)) => key < end,
                _ => true,
            }),
        )
    }

    /// Every key of `key_groups` with its value, in key order: a subtask's share of the
    /// state at another parallelism.
    pub fn entries_of_key_groups<'a>(
        &'a self,
        key_groups: &std::ops::Range<usize>,
    ) -> Result<impl Iterator<Item = Result<Entry>> + use<'a>> {
        let (start, end) = crate::key::key_group_bounds(key_groups);
        self.entries_between(&start, end.as_deref())
    }

    /// Writes the memtable out as the newest run (if it holds anything), then merges runs
    /// as their tiers call for.
    pub fn flush(&mut self) -> Result<()> {
        if self.write_memtable()? {
            self.compact()?;
        }
        Ok(())
    }

    /// Writes the memtable out as the newest run, if it holds anything; returns whether it
    /// did.
    fn write_memtable(&mut self) -> Result<bool> {
        if self.memtable.is_empty() {
            return Ok(false);
        }
        let mut writer = RunWriter::create(self.new_run_path())?;
        for (key, value) in self.memtable.sorted() {
            writer.add(key, value)?;
        }
        let meta = writer.finish()?;
        self.stats.flushed_bytes += meta.bytes;
        self.runs
            .insert(0, SortedRun::single(Arc::new(Run::open(meta.path)?)));
        self.memtable.clear();
        Ok(true)
    }

    /// Writes the memtable out and returns the runs that now hold all of the state, newest
    /// first: what a checkpoint stores. Holding them keeps their files while they are
    /// uploaded, even if a merge replaces them meanwhile. The merges the new run calls for
    /// wait for the next write, so that they do not hold up the barrier.
    pub fn checkpoint(&mut self) -> Result<Vec<Arc<Run>>> {
        self.merges_owed |= self.write_memtable()?;
        Ok(self.runs())
    }

    /// The run files that hold the state once flushed, newest first, as
    /// [`Store::checkpoint`] lists them: the fragments a merge under way has written come
    /// right after the runs it merges (they repeat those runs' entries, so a store opened
    /// over the list reads the same).
    pub fn runs(&self) -> Vec<Arc<Run>> {
        let written = self
            .merging
            .as_ref()
            .map(|m| (m.inputs(self.runs.len()).end, m.output().fragments()));
        let mut files = Vec::new();
        for (i, run) in self.runs.iter().enumerate() {
            files.extend(run.fragments().iter().cloned());
            if let Some((inputs_end, fragments)) = written
                && inputs_end == i + 1
            {
                files.extend(fragments.iter().cloned());
            }
        }
        files
    }

    /// How many sorted runs a read may have to look in.
    pub fn sorted_runs(&self) -> usize {
        self.runs.len()
    }

    /// Bytes the memtable holds (its budget bounds them).
    pub fn memtable_bytes(&self) -> usize {
        self.memtable.bytes()
    }

    /// Bytes of data blocks its block cache holds.
    pub fn block_cache_bytes(&self) -> usize {
        self.cache.borrow().bytes()
    }

    /// What it has written.
    pub fn stats(&self) -> StoreStats {
        self.stats
    }

    /// How it uses memory and merges runs.
    pub fn options(&self) -> StoreOptions {
        self.options
    }

    /// Its directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn new_run_path(&mut self) -> PathBuf {
        let name = self.new_run_name();
        self.dir.join(format!("{name}.run"))
    }

    /// A name no other run of any store has: a flushed run's file name, or the start of
    /// the names of a merge's fragments.
    fn new_run_name(&mut self) -> String {
        let name = format!("{}-{:08}", self.run_prefix, self.next_run);
        self.next_run += 1;
        name
    }

    /// The tier of a run of `bytes`: 0 up to one memtable, then one more per `fan_in`
    /// times as large.
    fn tier(&self, bytes: u64) -> u32 {
        let base = self.options.memtable_bytes.max(1) as u64;
        let (mut tier, mut limit) = (0, base);
        while bytes > limit && tier < 32 {
            tier += 1;
            limit = limit.saturating_mul(self.options.fan_in as u64);
        }
        tier
    }

    /// Goes on with merging for up to [`Store::merge_budget`] bytes written, starting the
    /// merges the runs call for; while there are more than `max_runs` runs, without a
    /// limit until there are not.
    fn compact(&mut self) -> Result<()> {
        let mut budget = None;
        loop {
            if self.merging.is_none() {
                let Some(count) = self.next_merge() else {
                    return Ok(());
                };
                let name = self.new_run_name();
                self.merging = Some(Merging::start(name, count, self.runs.len()));
            }
            let left = *budget.get_or_insert_with(|| self.merge_budget());
            let catching_up = self.runs.len() > self.options.max_runs;
            if left == 0 && !catching_up {
                return Ok(());
            }
            let limit = match catching_up {
                true => left.max(self.options.merge_bytes_per_flush as u64),
                false => left,
            };
            budget = Some(left.saturating_sub(self.merge_step(limit)?));
        }
    }

    /// Bytes merges may write at this flush: `merge_bytes_per_flush`, or more when the
    /// merge under way would otherwise not be done before `max_runs` flushed runs have
    /// piled up on it (what is left of it, shared among the flushes left).
    fn merge_budget(&self) -> u64 {
        let base = self.options.merge_bytes_per_flush as u64;
        let Some(merging) = &self.merging else {
            return base;
        };
        let inputs = merging.inputs(self.runs.len());
        let input_bytes: u64 = self.runs[inputs].iter().map(SortedRun::bytes).sum();
        let left = input_bytes.saturating_sub(merging.output().bytes());
        let flushes_left = (self.options.max_runs + 1).saturating_sub(self.runs.len());
        base.max(left.div_ceil(flushes_left.max(1) as u64))
    }

    /// How many of the newest runs to merge next, if any: all of them when the runs above
    /// the oldest hold as many bytes as it, or deletions of half its entries (merging all
    /// then costs no more than what was written since the last time, and only a merge
    /// that reaches the oldest run drops deletions), else the newest `fan_in` when they
    /// share a tier or there are too many runs.
    fn next_merge(&self) -> Option<usize> {
        if self.bottom_is_stale() {
            return Some(self.runs.len());
        }
        let fan_in = self.options.fan_in;
        if self.runs.len() < fan_in {
            return None;
        }
        let first = self.tier(self.runs[0].bytes());
        let same_tier = self.runs[..fan_in]
            .iter()
            .all(|run| self.tier(run.bytes()) == first);
        (same_tier || self.runs.len() > self.options.max_runs).then_some(fan_in)
    }

    /// Whether the runs above the oldest hold as many bytes as it, or deletions of half
    /// its entries.
    fn bottom_is_stale(&self) -> bool {
        let Some((oldest, newer)) = self.runs.split_last() else {
            return false;
        };
        let newer_bytes: u64 = newer.iter().map(SortedRun::bytes).sum();
        let newer_deletions: u64 = newer.iter().map(SortedRun::deletions).sum();
        !newer.is_empty()
            && (newer_bytes >= oldest.bytes()
                || newer_deletions.saturating_mul(2) >= oldest.entries())
    }

    /// Writes the next fragment of the merge under way, of about `limit` bytes at most;
    /// once the merge has written all, its output replaces the runs it merged. Returns the
    /// bytes written.
    fn merge_step(&mut self, limit: u64) -> Result<u64> {
        let mut merging = self.merging.take().expect("a merge under way");
        let inputs = merging.inputs(self.runs.len());
        let path = self.dir.join(merging.next_fragment_name());
        let written = merging.write_fragment(&self.runs[inputs.clone()], path, limit)?;
        self.stats.merged_bytes += written;
        if !merging.is_done() {
            self.merging = Some(merging);
            return Ok(written);
        }
        self.stats.merges += 1;
        for run in self.runs.drain(inputs.clone()) {
            run.retire();
        }
        let output = merging.into_output();
        if !output.is_empty() {
            self.runs.insert(inputs.start, output);
        }
        Ok(written)
    }
}

/// 16 hex digits unlikely to recur in any process: the wall clock's nanoseconds, the process
/// id and a counter, hashed.
fn unique_prefix() -> String {
    static STORES: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let mut seed = Vec::with_capacity(32);
    seed.extend_from_slice(&nanos.to_le_bytes());
    seed.extend_from_slice(&std::process::id().to_le_bytes());
    seed.extend_from_slice(&STORES.fetch_add(1, Ordering::Relaxed).to_le_bytes());
    format!("{:016x}", twox_hash::XxHash3_64::oneshot(&seed))
}

#[cfg(test)]
mod tests;
