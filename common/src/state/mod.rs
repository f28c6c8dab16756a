//! Operator state in snapshots: a compact binary encoding, checksums, key groups, and the
//! bookkeeping of incremental snapshots.

pub mod changes;
pub mod encoding;

pub use changes::{Epochs, OperatorState, Removals, SnapshotRequest, SnapshotScope, StateKind};
pub use encoding::{StateReader, StateWriter, crc32};
