//! Events travelling in band through a channel: data and control, in one order.

use crate::chunk::Chunk;

/// Event time in milliseconds since the epoch.
pub type Timestamp = i64;

/// The wall clock, in milliseconds since the epoch.
pub fn wall_clock() -> Timestamp {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as Timestamp)
        .unwrap_or(0)
}

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
    /// The channel carries nothing more, and why: a downstream task ends the way its
    /// inputs ended (see [`StreamEnd`]).
    End(StreamEnd),
}

/// Why a stream (a channel, a task's input, a task) ended. What a sink may do at its end
/// depends on it: only a stream whose input truly ended, after the job's final
/// checkpoint, may commit its last rows; a stopped or cancelled one leaves what no
/// completed checkpoint covers to the restore, which replays it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum StreamEnd {
    /// Every source read all its input (and, with checkpoints, the final checkpoint taken
    /// after that completed).
    Finished,
    /// The sources were told to stop: what they had read was processed to the end.
    Stopped,
    /// The tasks were cancelled: whatever was in flight was dropped.
    Cancelled,
}

impl StreamEnd {
    /// The end of a stream fed by streams that ended as `self` and `other`: the more
    /// abrupt of the two (an input finished and another stopped is a stopped stream).
    pub fn and(self, other: StreamEnd) -> StreamEnd {
        self.max(other)
    }
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

/// What running tasks are asked to do instead of running on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopRequest {
    /// Sources stop reading; what they read flows through and is written, and the tasks
    /// end [`StreamEnd::Stopped`].
    Drain,
    /// Every task ends at its next step, [`StreamEnd::Cancelled`]: what is in flight is
    /// dropped, sinks roll back what no completed checkpoint covers.
    Cancel,
}

impl StopRequest {
    /// How a task told this ends.
    pub fn end(self) -> StreamEnd {
        match self {
            StopRequest::Drain => StreamEnd::Stopped,
            StopRequest::Cancel => StreamEnd::Cancelled,
        }
    }
}
