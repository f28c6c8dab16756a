//! A sorted run: the entries of one flush or one merge, in key order, kept as one or more
//! run files ("fragments") whose key ranges follow each other. A merge writes its output a
//! fragment at a time, so no single file, upload or pause grows with the whole state.

use std::cell::RefCell;
use std::sync::Arc;

use crate::cache::BlockCache;
use crate::error::Result;
use crate::run::{Entry, Lookup, Run};

/// Fragments of one sorted run, in key order.
#[derive(Debug, Default)]
pub(crate) struct SortedRun {
    fragments: Vec<Arc<Run>>,
    bytes: u64,
    entries: u64,
    deletions: u64,
}

impl SortedRun {
    /// A sorted run of one file.
    pub fn single(run: Arc<Run>) -> SortedRun {
        let mut sorted = SortedRun::default();
        sorted.push(run);
        sorted
    }

    /// Adds `run` after the fragments it has: its keys must all be greater than theirs.
    pub fn push(&mut self, run: Arc<Run>) {
        let meta = run.meta();
        self.bytes += meta.bytes;
        self.entries += meta.entries;
        self.deletions += meta.deletions;
        self.fragments.push(run);
    }

    /// Its fragments in key order.
    pub fn fragments(&self) -> &[Arc<Run>] {
        &self.fragments
    }

    /// Bytes of its files.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Entries, deletions included.
    pub fn entries(&self) -> u64 {
        self.entries
    }

    /// Entries that record a deletion.
    pub fn deletions(&self) -> u64 {
        self.deletions
    }

    /// Whether it has no fragment.
    pub fn is_empty(&self) -> bool {
        self.fragments.is_empty()
    }

    /// What it says of `key`: only the fragment whose range may hold it is asked.
    pub fn get_cached(&self, key: &[u8], cache: &RefCell<BlockCache>) -> Result<Lookup> {
        match self.fragments.get(self.fragment_for(key)) {
            Some(run) => run.get_cached(key, cache),
            None => Ok(Lookup::Absent),
        }
    }

    /// Its entries with keys at or after `start`, in key order.
    pub fn entries_from<'a>(
        &'a self,
        start: &[u8],
    ) -> impl Iterator<Item = Result<Entry>> + use<'a> {
        let first = self.fragment_for(start);
        let start = start.to_vec();
        self.fragments[first..]
            .iter()
            .flat_map(move |run| run.entries_from(&start))
    }

    /// Marks every fragment as no longer needed by its store.
    pub fn retire(&self) {
        self.fragments.iter().for_each(|run| run.retire());
    }

    /// The first fragment whose largest key is at least `key`.
    fn fragment_for(&self, key: &[u8]) -> usize {
        self.fragments
            .partition_point(|run| run.max_key().is_some_and(|max| max < key))
    }
}

/// Groups runs given newest first into sorted runs: consecutive fragments of one merge
/// (named alike, see [`fragment_group`]) form one; any other run stands alone.
pub(crate) fn group_fragments(runs: Vec<Arc<Run>>) -> Vec<SortedRun> {
    let mut sorted: Vec<SortedRun> = Vec::new();
    let mut group: Option<String> = None;
    for run in runs {
        let this = fragment_group(run.name()).map(str::to_string);
        match sorted.last_mut() {
            Some(last) if this.is_some() && this == group => last.push(run),
            _ => sorted.push(SortedRun::single(run)),
        }
        group = this;
    }
    sorted
}

/// The name a fragment shares with the other fragments of its merge: a fragment's file is
/// named `{store}-{merge}-{fragment}.run`, a flushed run's `{store}-{run}.run` (none).
fn fragment_group(name: &str) -> Option<&str> {
    let stem = name.strip_suffix(".run")?;
    let (group, fragment) = stem.rsplit_once('-')?;
    let is_fragment =
        group.contains('-') && !fragment.is_empty() && fragment.bytes().all(|b| b.is_ascii_digit());
    is_fragment.then_some(group)
}
