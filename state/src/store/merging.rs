//! A merge under way: its output written a fragment at a time, each fragment the merged
//! entries of a key range that starts where the one before ended.

use std::ops::Range;
use std::path::PathBuf;
use std::sync::Arc;

use crate::error::Result;
use crate::merge::{Merged, Source};
use crate::run::{Run, RunWriter};
use crate::sorted_run::SortedRun;

/// A merge of consecutive sorted runs of a store into one. Runs flushed while it goes on
/// are newer than all its inputs, so the inputs are found by their distance from the
/// oldest run, which does not change. Until it is done the inputs stay in the store and
/// answer reads; the fragments written so far repeat their entries of the keys before
/// `resume`.
#[derive(Debug)]
pub(super) struct Merging {
    /// How many sorted runs it merges.
    inputs: usize,
    /// How many older sorted runs lie below its inputs.
    below: usize,
    output: SortedRun,
    /// The smallest key the next fragment may hold.
    resume: Vec<u8>,
    done: bool,
    /// Starts the file name of every fragment.
    name: String,
}

impl Merging {
    /// A merge of the newest `count` of `runs` sorted runs, its fragments named after
    /// `name`.
    pub fn start(name: String, count: usize, runs: usize) -> Merging {
        Merging {
            inputs: count,
            below: runs - count,
            output: SortedRun::default(),
            resume: Vec::new(),
            done: false,
            name,
        }
    }

    /// Where its inputs are among a store's `runs` sorted runs, newest first.
    pub fn inputs(&self, runs: usize) -> Range<usize> {
        let end = runs - self.below;
        end - self.inputs..end
    }

    /// The file name of the next fragment.
    pub fn next_fragment_name(&self) -> String {
        format!("{}-{:04}.run", self.name, self.output.fragments().len())
    }

    /// Merges `inputs` (newest first) from where the last fragment ended into a fragment
    /// at `path`, until it holds `limit` bytes or every entry is in; returns its bytes.
    /// Deletions are dropped when nothing older than the inputs remains.
    pub fn write_fragment(
        &mut self,
        inputs: &[SortedRun],
        path: PathBuf,
        limit: u64,
    ) -> Result<u64> {
        let sources: Vec<Source<'_>> = inputs
            .iter()
            .map(|run| Box::new(run.entries_from(&self.resume)) as Source<'_>)
            .collect();
        let mut writer = RunWriter::create(path)?;
        self.done = true;
        for entry in Merged::new(sources, self.below == 0)? {
            let (key, value) = entry?;
            writer.add(&key, value.as_deref())?;
            if writer.bytes_written() >= limit {
                // The smallest key after this one.
                self.resume = key;
                self.resume.push(0);
                self.done = false;
                break;
            }
        }
        if writer.entries() == 0 {
            // Every key left was deleted: no fragment (the writer leaves no file).
            return Ok(0);
        }
        let meta = writer.finish()?;
        self.output.push(Arc::new(Run::open(meta.path)?));
        Ok(meta.bytes)
    }

    /// Whether every entry of its inputs is in its output.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// The fragments written so far, in key order.
    pub fn output(&self) -> &SortedRun {
        &self.output
    }

    /// The sorted run it wrote.
    pub fn into_output(self) -> SortedRun {
        self.output
    }
}
