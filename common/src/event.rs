//! Events travelling in band through a channel: data and control, in one order.

use crate::chunk::Chunk;

/// Event time in milliseconds since the epoch.
pub type Timestamp = i64;

/// One element of a stream between tasks. Control events never overtake data sent
/// before them, since all travel in the same ordered channel.
#[derive(Debug, Clone)]
pub enum Event {
    /// A chunk of changelog rows.
    Data(Chunk),
    /// No row with an event time at or below this will follow on this channel.
    Watermark(Timestamp),
    /// Checkpoint barrier: everything before it belongs to checkpoint `n`, everything after
    /// to later ones.
    Barrier(Barrier),
    /// The channel carries nothing more.
    EndOfStream,
}

/// A checkpoint barrier.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Barrier {
    /// The checkpoint's id (increasing).
    pub checkpoint: u64,
    /// When the coordinator triggered it, in milliseconds since the epoch.
    pub triggered_at: Timestamp,
    /// Unaligned: the barrier overtakes queued data, which goes into the snapshot.
    pub unaligned: bool,
}
