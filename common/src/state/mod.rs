//! Operator state in snapshots: a compact binary encoding, checksums, key groups, and the
//! bookkeeping of incremental snapshots, and the files snapshots share.

pub mod changes;
pub mod encoding;
pub mod files;

pub use changes::{Epochs, OperatorState, Removals, SnapshotRequest, SnapshotScope, StateKind};
pub use encoding::{StateReader, StateWriter, crc32};
pub use files::SnapshotFile;
