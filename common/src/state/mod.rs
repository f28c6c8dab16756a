//! Operator state in snapshots: a compact binary encoding, checksums, and key groups.

pub mod codec;

pub use codec::{StateReader, StateWriter, crc32};
