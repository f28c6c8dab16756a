//! Operator state in snapshots: a compact binary encoding, checksums, key groups, and the
//! bookkeeping of incremental snapshots.

pub mod changes;
pub mod codec;

pub use changes::{Epochs, OperatorState, Removals, SnapshotRequest, SnapshotScope, StateKind};
pub use codec::{StateReader, StateWriter, crc32};
