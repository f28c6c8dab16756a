//! Incremental snapshots: an operator tags each piece of its state with the epoch (the
//! interval between two of its snapshots) it last changed in, and remembers what it
//! removed, so that a snapshot can hold only the changes since an earlier one. A restore
//! applies a full snapshot and then the snapshots of changes taken after it, in order.

use std::collections::VecDeque;

use bytes::Bytes;

use super::encoding::{StateReader, StateWriter};
use super::files::SnapshotFile;
use crate::Result;

/// What an operator's snapshot holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StateKind {
    /// All its state.
    Full,
    /// Only what changed since the snapshot of the checkpoint it was asked to extend.
    Changes,
}

/// One operator's part of a task snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OperatorState {
    /// Whether it is all the state or the changes since an earlier snapshot.
    pub kind: StateKind,
    /// The encoded state (empty for a stateless operator).
    pub bytes: Bytes,
    /// Files the state refers to by name rather than holds (the runs of an LSM store):
    /// stored beside the snapshot once, and shared by later snapshots that refer to them.
    pub files: Vec<SnapshotFile>,
}

impl OperatorState {
    /// All of an operator's state.
    pub fn full(bytes: impl Into<Bytes>) -> Self {
        OperatorState {
            kind: StateKind::Full,
            bytes: bytes.into(),
            files: Vec::new(),
        }
    }

    /// The changes since an earlier snapshot.
    pub fn changes(bytes: impl Into<Bytes>) -> Self {
        OperatorState {
            kind: StateKind::Changes,
            bytes: bytes.into(),
            files: Vec::new(),
        }
    }

    /// All of an operator's state: `bytes` that refer to `files`.
    pub fn with_files(bytes: impl Into<Bytes>, files: Vec<SnapshotFile>) -> Self {
        OperatorState {
            kind: StateKind::Full,
            bytes: bytes.into(),
            files,
        }
    }
}

/// What a checkpoint asks of an operator's snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SnapshotRequest {
    /// The checkpoint being taken.
    pub checkpoint: u64,
    /// The newest completed checkpoint this operator took a snapshot for in this run, if
    /// any: no later snapshot will be applied on top of an earlier one.
    pub completed: Option<u64>,
    /// Hold only the changes since `completed`'s snapshot (an operator that cannot, or
    /// did not snapshot `completed`, writes all its state).
    pub changes: bool,
}

impl SnapshotRequest {
    /// A request for all of the state, at `checkpoint`.
    pub fn full(checkpoint: u64) -> Self {
        SnapshotRequest {
            checkpoint,
            completed: None,
            changes: false,
        }
    }
}

/// What one snapshot must hold, from [`Epochs::close`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SnapshotScope {
    /// `Some(e)`: only state changed in epochs after `e`, and what was removed after
    /// `e`; `None`: all the state.
    pub changes_after: Option<u32>,
    /// Removals in this epoch or earlier are in a completed snapshot: they can be
    /// forgotten.
    pub settled: Option<u32>,
}

impl SnapshotScope {
    /// The operator state `bytes` written for this scope: changes, or all of it.
    pub fn state(&self, bytes: impl Into<Bytes>) -> OperatorState {
        match self.changes_after {
            Some(_) => OperatorState::changes(bytes),
            None => OperatorState::full(bytes),
        }
    }
}

/// Numbers the intervals between an operator's snapshots.
#[derive(Debug)]
pub struct Epochs {
    current: u32,
    /// `(checkpoint, the last epoch its snapshot holds)`, oldest first.
    closed: VecDeque<(u64, u32)>,
}

impl Default for Epochs {
    fn default() -> Self {
        Epochs {
            current: 1,
            closed: VecDeque::new(),
        }
    }
}

impl Epochs {
    /// The epoch that changes made now belong to.
    pub fn current(&self) -> u32 {
        self.current
    }

    /// The state was just restored from exactly this subtask's snapshot of `checkpoint`:
    /// that snapshot holds epoch 0, the epoch restored state is tagged with, so a later
    /// snapshot can extend it with the changes made since.
    pub fn restored(&mut self, checkpoint: u64) {
        self.closed.clear();
        self.closed.push_back((checkpoint, 0));
    }

    /// Ends the current epoch with the snapshot `request` asks for; returns what that
    /// snapshot holds.
    pub fn close(&mut self, request: &SnapshotRequest) -> SnapshotScope {
        let settled = request.completed.and_then(|completed| {
            while self.closed.front().is_some_and(|(c, _)| *c < completed) {
                self.closed.pop_front();
            }
            self.closed
                .front()
                .filter(|(c, _)| *c == completed)
                .map(|(_, epoch)| *epoch)
        });
        self.closed.push_back((request.checkpoint, self.current));
        self.current = self.current.saturating_add(1);
        SnapshotScope {
            // Epochs run out after 2^32 - 1 snapshots: changes made after the last one
            // cannot be told apart, so from then on every snapshot is full.
            changes_after: settled.filter(|e| request.changes && *e < u32::MAX),
            settled,
        }
    }
}

/// What an operator removed, remembered until a completed snapshot holds the removal:
/// each is a key and a value (either may be empty) with the epoch it was removed in and
/// the epoch the removed state was born in, packed back to back in one buffer.
#[derive(Debug, Default)]
pub struct Removals {
    bytes: Vec<u8>,
    /// Each removal, in the order removed.
    entries: VecDeque<Removal>,
    /// Bytes at the start of `bytes` that belong to forgotten removals.
    forgotten: usize,
}

#[derive(Debug, Clone, Copy)]
struct Removal {
    epoch: u32,
    born: u32,
    end: usize,
    key_len: u32,
}

impl Removals {
    /// Remembers that `key` (and `value`), born in epoch `born`, was removed in `epoch`.
    /// A snapshot of changes after epoch `e` holds the removals after `e` of what was born
    /// by `e` (what was born later is in no snapshot it extends); `born` 0 keeps it in
    /// every such snapshot.
    pub fn push(&mut self, epoch: u32, born: u32, key: &[u8], value: &[u8]) {
        if born >= epoch {
            // Born in the epoch it is removed in: no snapshot holds it, none must remove
            // it (a job that never checkpoints stays in its first epoch and keeps none).
            return;
        }
        self.bytes.extend_from_slice(key);
        self.bytes.extend_from_slice(value);
        self.entries.push_back(Removal {
            epoch,
            born,
            end: self.bytes.len(),
            key_len: key.len() as u32,
        });
    }

    /// Forgets the removals of `epoch` and earlier.
    pub fn forget_through(&mut self, epoch: u32) {
        while let Some(removal) = self.entries.front().filter(|r| r.epoch <= epoch) {
            self.forgotten = removal.end;
            self.entries.pop_front();
        }
        if self.entries.is_empty() {
            self.bytes.clear();
            self.forgotten = 0;
        } else if self.forgotten > self.bytes.len() / 2 {
            self.bytes.drain(..self.forgotten);
            for removal in &mut self.entries {
                removal.end -= self.forgotten;
            }
            self.forgotten = 0;
        }
    }

    /// The `(key, value)` of each removal after `epoch` of what was born by `epoch`, in
    /// the order removed.
    pub fn after(&self, epoch: u32) -> impl Iterator<Item = (&[u8], &[u8])> {
        let first = self.entries.partition_point(|r| r.epoch <= epoch);
        let mut start = match first {
            0 => self.forgotten,
            i => self.entries[i - 1].end,
        };
        self.entries.range(first..).filter_map(move |removal| {
            let entry = &self.bytes[start..removal.end];
            start = removal.end;
            (removal.born <= epoch).then(|| entry.split_at(removal.key_len as usize))
        })
    }

    /// Writes what a snapshot holding the changes after epoch `after` must remove (none
    /// for a full snapshot, `after` = `None`): a count, then each key and value.
    pub fn save(&self, after: Option<u32>, out: &mut StateWriter) {
        let Some(epoch) = after else {
            out.u64(0);
            return;
        };
        out.u64(self.after(epoch).count() as u64);
        for (key, value) in self.after(epoch) {
            out.bytes(key).bytes(value);
        }
    }

    /// Reads the removals [`Removals::save`] wrote, handing each key and value to
    /// `remove`.
    pub fn load(input: &mut StateReader<'_>, mut remove: impl FnMut(&[u8], &[u8])) -> Result<()> {
        for _ in 0..input.count(2)? {
            let (key, value) = (input.bytes()?, input.bytes()?);
            remove(key, value);
        }
        Ok(())
    }

    /// Removals remembered.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// No removal is remembered.
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(checkpoint: u64, completed: Option<u64>, changes: bool) -> SnapshotRequest {
        SnapshotRequest {
            checkpoint,
            completed,
            changes,
        }
    }

    #[test]
    fn a_snapshot_holds_the_epochs_after_the_completed_one() {
        let mut epochs = Epochs::default();
        assert_eq!(epochs.current(), 1);
        let first = epochs.close(&request(1, None, true));
        assert_eq!(first.changes_after, None, "nothing to extend: all state");
        assert_eq!(epochs.current(), 2);
        epochs.close(&request(2, Some(1), true));
        // Checkpoint 2 did not complete; 3 extends 1 again and holds epochs 2 and 3.
        let third = epochs.close(&request(3, Some(1), true));
        assert_eq!(third.changes_after, Some(1));
        let fourth = epochs.close(&request(4, Some(3), false));
        assert_eq!(fourth.changes_after, None, "a full snapshot was asked for");
        assert_eq!(fourth.settled, Some(3));
        let unknown = epochs.close(&request(5, Some(2), true));
        assert_eq!(unknown.changes_after, None, "2 is forgotten: all state");

        // Once epochs run out every snapshot is full (changes could not be told apart).
        let mut epochs = Epochs {
            current: u32::MAX - 1,
            closed: VecDeque::new(),
        };
        epochs.close(&request(1, None, true));
        assert_eq!(
            epochs.close(&request(2, Some(1), true)).changes_after,
            Some(u32::MAX - 1)
        );
        assert_eq!(epochs.close(&request(3, Some(2), true)).changes_after, None);
    }

    #[test]
    fn a_restored_state_counts_as_the_snapshot_restored_from() {
        let mut epochs = Epochs::default();
        epochs.restored(9);
        let next = |checkpoint, completed| SnapshotRequest {
            checkpoint,
            completed,
            changes: true,
        };
        // Restored state carries epoch 0: a snapshot extending 9 holds what came after.
        let scope = epochs.close(&next(11, Some(9)));
        assert_eq!((scope.changes_after, scope.settled), (Some(0), Some(0)));
        let scope = epochs.close(&next(12, Some(11)));
        assert_eq!((scope.changes_after, scope.settled), (Some(1), Some(1)));
    }

    #[test]
    fn removals_are_kept_until_settled() {
        let mut removals = Removals::default();
        removals.push(1, 0, b"k1", b"");
        removals.push(2, 0, b"k2", b"row2");
        removals.push(2, 2, b"born-later", b"");
        removals.push(2, 1, b"k3", b"row3");
        removals.push(3, 0, b"", b"row4");
        let after_1: Vec<_> = removals.after(1).collect();
        assert_eq!(
            after_1,
            [(&b"k2"[..], &b"row2"[..]), (b"k3", b"row3"), (b"", b"row4")]
        );
        removals.forget_through(2);
        assert_eq!(removals.len(), 1);
        assert_eq!(
            removals.after(0).collect::<Vec<_>>(),
            [(&b""[..], &b"row4"[..])]
        );
        removals.push(4, 0, b"k5", b"");
        assert_eq!(
            removals.after(3).collect::<Vec<_>>(),
            [(&b"k5"[..], &b""[..])]
        );
        removals.forget_through(4);
        assert!(removals.is_empty());
    }
}
