//! The initial snapshot, read in chunks by primary key, each in a short transaction of its
//! own, while the replication slot (created first) keeps every change made meanwhile.
//!
//! A change streamed later is one the snapshot may already show: every chunk remembers its
//! transaction snapshot (`pg_current_snapshot()`: `xmin:xmax:xip…`) and the key range it
//! covered, and a change to a key in that range is dropped when its transaction was
//! visible to the chunk's read, and kept otherwise. Each key's rows are then its row as its
//! chunk saw it, followed by exactly the changes that chunk did not see, in commit order.
//! Chunks can be read at any pace and a checkpoint can fall between any two of them: a
//! restore reads on after the last key emitted. No long transaction holds back vacuum.
//!
//! Keys are compared as PostgreSQL orders them: integers as numbers, everything else by
//! its text (`COLLATE "C"` for collatable types, whose byte order the chunks are read in;
//! the ISO text of dates and timestamps sorts as they do).

use std::cmp::Ordering;

use eddy_common::state::{StateReader, StateWriter};
use eddy_common::{EddyError, Result};

use super::lsn::Lsn;

/// How a key column's values are ordered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KeyOrder {
    /// As 64-bit integers.
    Integer,
    /// By the bytes of their text.
    Text,
}

/// A key: one text per key column (keys are never NULL).
pub(crate) type Key = Vec<Vec<u8>>;

/// Compares two keys column by column.
pub(crate) fn compare(orders: &[KeyOrder], a: &Key, b: &Key) -> Ordering {
    for ((order, x), y) in orders.iter().zip(a).zip(b) {
        let ordering = match order {
            KeyOrder::Integer => integer(x).cmp(&integer(y)),
            KeyOrder::Text => x.cmp(y),
        };
        if ordering != Ordering::Equal {
            return ordering;
        }
    }
    Ordering::Equal
}

fn integer(text: &[u8]) -> i64 {
    std::str::from_utf8(text)
        .ok()
        .and_then(|t| t.parse().ok())
        .unwrap_or(i64::MIN)
}

/// A transaction snapshot: which transactions a read saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TransactionSnapshot {
    xmin: u64,
    xmax: u64,
    in_progress: Vec<u64>,
}

impl TransactionSnapshot {
    /// Parses `pg_current_snapshot()`'s text (`xmin:xmax:xip,xip,…`).
    pub fn parse(text: &str) -> std::result::Result<Self, String> {
        let bad = || format!("'{text}' is not a transaction snapshot");
        let mut parts = text.split(':');
        let number = |part: Option<&str>| part.and_then(|p| p.parse::<u64>().ok());
        let xmin = number(parts.next()).ok_or_else(bad)?;
        let xmax = number(parts.next()).ok_or_else(bad)?;
        let in_progress = match parts.next() {
            None | Some("") => Vec::new(),
            Some(list) => list
                .split(',')
                .map(|x| x.parse::<u64>().map_err(|_| bad()))
                .collect::<std::result::Result<_, _>>()?,
        };
        Ok(TransactionSnapshot {
            xmin,
            xmax,
            in_progress,
        })
    }

    /// Whether the committed transaction `xid` (32 bits, as `pgoutput` gives it) was
    /// visible to the read: it committed before the snapshot was taken.
    pub fn saw(&self, xid: u32) -> bool {
        let xid = self.widen(xid);
        xid < self.xmin || (xid < self.xmax && !self.in_progress.contains(&xid))
    }

    /// A 32-bit transaction id in the 64-bit space of `xmax`: the nearest one.
    fn widen(&self, xid: u32) -> u64 {
        let epoch = self.xmax & !0xFFFF_FFFF;
        let candidate = epoch | u64::from(xid);
        if candidate > self.xmax + (1 << 31) && candidate >= 1 << 32 {
            candidate - (1 << 32)
        } else if candidate + (1 << 31) < self.xmax {
            candidate + (1 << 32)
        } else {
            candidate
        }
    }
}

/// What one chunk read: the keys after the previous chunk's last up to `last` (`None`:
/// to the end of the table), as `snapshot` saw them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ChunkMark {
    pub last: Option<Key>,
    pub snapshot: TransactionSnapshot,
    /// Where WAL was inserted after the read: every transaction it saw has its commit
    /// record before (written out or not).
    pub wal_after: Lsn,
}

/// The chunks read so far, in key order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ChunkMarks {
    marks: Vec<ChunkMark>,
}

impl ChunkMarks {
    pub fn push(&mut self, mark: ChunkMark) {
        self.marks.push(mark);
    }

    pub fn is_empty(&self) -> bool {
        self.marks.is_empty()
    }

    /// Whether the chunk that read `key` saw transaction `xid`'s change of it already.
    pub fn saw(&self, orders: &[KeyOrder], key: &Key, xid: u32) -> bool {
        self.marks
            .iter()
            .find(|m| {
                m.last
                    .as_ref()
                    .is_none_or(|last| compare(orders, key, last) != Ordering::Greater)
            })
            .is_some_and(|m| m.snapshot.saw(xid))
    }

    /// Forgets the chunks once the stream has passed `lsn`: no later transaction can have
    /// been seen by any of them.
    pub fn passed(&mut self, lsn: Lsn) {
        if self.marks.iter().all(|m| m.wal_after <= lsn) {
            self.marks.clear();
        }
    }

    pub fn write(&self, out: &mut StateWriter) {
        out.u64(self.marks.len() as u64);
        for mark in &self.marks {
            write_key(out, mark.last.as_ref());
            let snapshot = &mark.snapshot;
            out.u64(snapshot.xmin)
                .u64(snapshot.xmax)
                .u64(snapshot.in_progress.len() as u64);
            for xid in &snapshot.in_progress {
                out.u64(*xid);
            }
            out.u64(mark.wal_after.0);
        }
    }

    pub fn read(input: &mut StateReader<'_>) -> Result<Self> {
        let mut marks = Vec::new();
        for _ in 0..input.count(8)? {
            let last = read_key(input)?;
            let (xmin, xmax) = (input.u64()?, input.u64()?);
            let in_progress = (0..input.count(8)?)
                .map(|_| input.u64())
                .collect::<Result<_>>()?;
            marks.push(ChunkMark {
                last,
                snapshot: TransactionSnapshot {
                    xmin,
                    xmax,
                    in_progress,
                },
                wal_after: Lsn(input.u64()?),
            });
        }
        Ok(ChunkMarks { marks })
    }
}

/// Writes an optional key.
pub(crate) fn write_key(out: &mut StateWriter, key: Option<&Key>) {
    match key {
        None => {
            out.u64(0);
        }
        Some(key) => {
            out.u64(key.len() as u64 + 1);
            for value in key {
                out.bytes(value);
            }
        }
    }
}

/// Reads what [`write_key`] wrote.
pub(crate) fn read_key(input: &mut StateReader<'_>) -> Result<Option<Key>> {
    let count = input.u64()?;
    if count == 0 {
        return Ok(None);
    }
    if count > 1024 {
        return Err(EddyError::Snapshot(format!(
            "a postgres-cdc position with a key of {} columns",
            count - 1
        )));
    }
    (1..count)
        .map(|_| input.bytes().map(<[u8]>::to_vec))
        .collect::<Result<_>>()
        .map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(texts: &[&str]) -> Key {
        texts.iter().map(|t| t.as_bytes().to_vec()).collect()
    }

    #[test]
    fn snapshots_see_what_committed_before_them() {
        let snapshot = TransactionSnapshot::parse("100:105:101,103").unwrap();
        assert!(snapshot.saw(99));
        assert!(snapshot.saw(100));
        assert!(!snapshot.saw(101));
        assert!(snapshot.saw(102));
        assert!(!snapshot.saw(103));
        assert!(!snapshot.saw(105));
        assert!(!snapshot.saw(4000));
        assert!(TransactionSnapshot::parse("100:105:").unwrap().saw(104));
        assert!(TransactionSnapshot::parse("x:1:").is_err());
    }

    #[test]
    fn transaction_ids_wrap_around_32_bits() {
        // Epoch 1: xmax is 2^32 + 10; xid 5 is 2^32 + 5 (seen), 4294967290 is from epoch 0.
        let snapshot = TransactionSnapshot::parse("4294967301:4294967306:").unwrap();
        assert!(snapshot.saw(5));
        assert!(snapshot.saw(4_294_967_290));
        assert!(!snapshot.saw(10));
    }

    #[test]
    fn a_change_is_dropped_only_by_the_chunk_of_its_key() {
        let orders = [KeyOrder::Integer];
        let mut marks = ChunkMarks::default();
        marks.push(ChunkMark {
            last: Some(key(&["9"])),
            snapshot: TransactionSnapshot::parse("50:50:").unwrap(),
            wal_after: Lsn(10),
        });
        marks.push(ChunkMark {
            last: None,
            snapshot: TransactionSnapshot::parse("60:60:").unwrap(),
            wal_after: Lsn(20),
        });
        // Transaction 55 committed between the two chunks' reads.
        assert!(!marks.saw(&orders, &key(&["9"]), 55));
        assert!(marks.saw(&orders, &key(&["10"]), 55), "10 > 9 numerically");
        assert!(marks.saw(&orders, &key(&["2"]), 40));
        let mut out = StateWriter::new();
        marks.write(&mut out);
        let bytes = out.finish();
        let restored = ChunkMarks::read(&mut StateReader::new(&bytes, "marks")).unwrap();
        assert_eq!(restored, marks);
        marks.passed(Lsn(15));
        assert!(!marks.is_empty());
        marks.passed(Lsn(20));
        assert!(marks.is_empty());
    }

    #[test]
    fn text_keys_compare_bytewise_then_by_the_next_column() {
        let orders = [KeyOrder::Text, KeyOrder::Integer];
        assert_eq!(
            compare(&orders, &key(&["a", "10"]), &key(&["a", "9"])),
            Ordering::Greater
        );
        assert_eq!(
            compare(&orders, &key(&["B", "1"]), &key(&["a", "1"])),
            Ordering::Less
        );
    }
}
