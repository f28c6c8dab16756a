//! The windows whose keys an operator on the LSM backend wrote out of memory (window
//! aggregates, window Top-N). Their stored keys start with the window's bounds in bytes
//! that sort as the times do ([`sortable`]), the window's end first, so that a window's keys
//! of one key group are one range of the store, and windows sort in the order they fire.
//! When a window fires, the operator reads back the keys of each key group recorded here.

use std::collections::{BTreeMap, BTreeSet};

use eddy_common::Result;
use eddy_common::event::Timestamp;
use eddy_common::state::{StateReader, StateWriter};

use crate::partition::KeyScope;

/// A time's big-endian bytes with the sign bit flipped, so that they sort as the time.
pub(crate) fn sortable(time: Timestamp) -> [u8; 8] {
    ((time as u64) ^ (1 << 63)).to_be_bytes()
}

/// The time [`sortable`] wrote at the start of `bytes`; `None` for fewer than 8 bytes.
pub(crate) fn unsortable(bytes: &[u8]) -> Option<Timestamp> {
    let bytes: [u8; 8] = bytes.get(..8)?.try_into().ok()?;
    Some((u64::from_be_bytes(bytes) ^ (1 << 63)) as Timestamp)
}

/// The bytes a window of bounds (end, start) starts its stored keys with: end, then
/// start, each [`sortable`].
pub(crate) fn window_prefix((end, start): (Timestamp, Timestamp)) -> [u8; 16] {
    let mut prefix = [0; 16];
    prefix[..8].copy_from_slice(&sortable(end));
    prefix[8..].copy_from_slice(&sortable(start));
    prefix
}

/// The window (end, start) whose [`window_prefix`] `key` starts with; `None` for too few
/// bytes.
pub(crate) fn window_of(key: &[u8]) -> Option<(Timestamp, Timestamp)> {
    Some((unsortable(key)?, unsortable(key.get(8..)?)?))
}

/// Windows, by the prefix of their stored keys, with the key groups of their keys the
/// store may hold. A window's stored keys are read back a key group and a batch at a time
/// ([`SpilledWindows::resume`]), so that one larger than memory fires in parts.
#[derive(Debug, Clone)]
pub(crate) struct SpilledWindows {
    windows: BTreeMap<Vec<u8>, BTreeSet<u16>>,
    /// The last key read back of the first window's first key group, while it fires.
    resume: Option<Vec<u8>>,
    /// Keys (or rows) to read back in one call at most: a part of a window.
    pub(crate) part: usize,
}

/// Keys (or rows) read back in one call at most, by default.
const PART: usize = 1 << 17;

impl Default for SpilledWindows {
    fn default() -> Self {
        SpilledWindows {
            windows: BTreeMap::new(),
            resume: None,
            part: PART,
        }
    }
}

impl SpilledWindows {
    /// A key of `key_group` of the window whose keys start with `prefix` went to the store.
    pub(crate) fn mark(&mut self, prefix: &[u8], key_group: u16) {
        match self.windows.get_mut(prefix) {
            Some(groups) => {
                groups.insert(key_group);
            }
            None => {
                self.windows
                    .insert(prefix.to_vec(), BTreeSet::from([key_group]));
            }
        }
    }

    /// Whether the store may hold keys of `key_group` of the window of `prefix`.
    pub(crate) fn holds(&self, prefix: &[u8], key_group: u16) -> bool {
        self.windows
            .get(prefix)
            .is_some_and(|groups| groups.contains(&key_group))
    }

    /// Whether the store may hold keys of the window of `prefix`.
    pub(crate) fn contains(&self, prefix: &[u8]) -> bool {
        self.windows.contains_key(prefix)
    }

    /// The prefix of the window that fires first.
    pub(crate) fn first(&self) -> Option<&[u8]> {
        self.windows.keys().next().map(Vec::as_slice)
    }

    /// The first key group whose keys of the window of `prefix` have not all been read
    /// back, and the last key read back of it so far.
    pub(crate) fn next_group(&self, prefix: &[u8]) -> Option<(u16, Option<Vec<u8>>)> {
        let key_group = *self.windows.get(prefix)?.first()?;
        Some((key_group, self.resume.clone()))
    }

    /// The keys of the window of `prefix` in `key_group` were read back up to `last`, or
    /// all of them (`None`): then the key group, and the window once it has none, is
    /// forgotten.
    pub(crate) fn read_back(&mut self, prefix: &[u8], key_group: u16, last: Option<Vec<u8>>) {
        self.resume = last;
        if self.resume.is_some() {
            return;
        }
        if let Some(groups) = self.windows.get_mut(prefix) {
            groups.remove(&key_group);
            if groups.is_empty() {
                self.windows.remove(prefix);
            }
        }
    }

    /// Windows recorded.
    pub(crate) fn len(&self) -> usize {
        self.windows.len()
    }

    /// Whether no window is recorded.
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.windows.is_empty()
    }

    /// Forgets every window.
    pub(crate) fn clear(&mut self) {
        self.windows.clear();
    }

    /// Writes the windows, each with its key groups.
    pub(crate) fn write(&self, out: &mut StateWriter) {
        out.u64(self.windows.len() as u64);
        for (prefix, key_groups) in &self.windows {
            out.bytes(prefix).u64(key_groups.len() as u64);
            for key_group in key_groups {
                out.u64(*key_group as u64);
            }
        }
    }

    /// Reads what [`SpilledWindows::write`] wrote, keeping the key groups `scope` owns.
    pub(crate) fn read(&mut self, input: &mut StateReader<'_>, scope: &KeyScope) -> Result<()> {
        for _ in 0..input.count(2)? {
            let prefix = input.bytes()?.to_vec();
            for _ in 0..input.count(1)? {
                let key_group = input.u64()?;
                if usize::try_from(key_group).is_ok_and(|g| scope.owns(g)) {
                    self.mark(&prefix, key_group as u16);
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_sort_as_their_bytes_and_windows_in_the_order_they_fire() {
        let times = [Timestamp::MIN, -5, -1, 0, 1, 1_000, Timestamp::MAX];
        for pair in times.windows(2) {
            assert!(sortable(pair[0]) < sortable(pair[1]));
        }
        for time in times {
            assert_eq!(unsortable(&sortable(time)), Some(time));
        }
        assert_eq!(unsortable(&[1, 2]), None);

        let mut windows = SpilledWindows::default();
        windows.mark(&sortable(20), 3);
        windows.mark(&sortable(-10), 7);
        windows.mark(&sortable(20), 1);
        assert_eq!(windows.first(), Some(&sortable(-10)[..]));
        assert!(windows.holds(&sortable(20), 1) && !windows.holds(&sortable(20), 2));

        let mut out = StateWriter::with_capacity(64);
        windows.write(&mut out);
        let bytes = out.finish();
        let mut half = SpilledWindows::default();
        let scope = KeyScope {
            subtask: 0,
            parallelism: 2,
            max_parallelism: 8,
        };
        half.read(&mut StateReader::new(&bytes, "windows"), &scope)
            .unwrap();
        assert!(half.holds(&sortable(20), 1) && half.holds(&sortable(20), 3));
        assert!(
            !half.holds(&sortable(-10), 7),
            "key group 7 is the other subtask's"
        );
        assert_eq!(half.len(), 1, "no key group of the first window is owned");
        // Read back a key group at a time, each up to a key or to its end.
        let window = sortable(20);
        assert_eq!(half.next_group(&window), Some((1, None)));
        half.read_back(&window, 1, Some(b"k".to_vec()));
        assert_eq!(half.next_group(&window), Some((1, Some(b"k".to_vec()))));
        half.read_back(&window, 1, None);
        assert_eq!(half.next_group(&window), Some((3, None)));
        half.read_back(&window, 3, None);
        assert_eq!(half.next_group(&window), None);
        assert!(half.is_empty());
    }
}
