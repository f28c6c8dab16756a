//! The input gate of a task: merges its input channels fairly, combines their watermarks
//! (the minimum over channels still open), aligns checkpoint barriers, and ends when every
//! channel has ended.
//!
//! Alignment (exactly-once): once barrier `n` has arrived on a channel, that channel is not
//! read until barrier `n` has arrived on every open channel; then the gate yields the
//! barrier and reads all channels again. Without alignment (at-least-once) channels keep
//! being read, and the barrier is yielded when the last one arrives.

use std::future::poll_fn;
use std::task::Poll;
use std::time::{Duration, Instant};

use eddy_common::checkpointing::CheckpointingMode;
use eddy_common::chunk::Chunk;
use eddy_common::event::{Barrier, Event, Timestamp};
use eddy_common::{EddyError, Result};
use tokio::sync::mpsc::Receiver;

/// What the gate yields.
#[derive(Debug)]
pub enum Input {
    /// Rows from some channel.
    Data(Chunk),
    /// The combined watermark advanced.
    Watermark(Timestamp),
    /// Barrier `n` has arrived on every open channel: snapshot now. `aligned_for` is how
    /// long the first channel was held back.
    Barrier {
        /// The barrier.
        barrier: Barrier,
        /// Time from the first to the last arrival of this barrier.
        aligned_for: Duration,
    },
}

struct Channel {
    receiver: Receiver<Event>,
    watermark: Timestamp,
    ended: bool,
    /// Has delivered the barrier being aligned.
    arrived: bool,
}

/// The barrier being aligned.
struct Alignment {
    barrier: Barrier,
    started: Instant,
}

/// Merges a task's input channels.
pub struct InputGate {
    channels: Vec<Channel>,
    mode: CheckpointingMode,
    next: usize,
    emitted: Timestamp,
    alignment: Option<Alignment>,
}

impl InputGate {
    /// A gate over `receivers`, aligning barriers as `mode` says.
    pub fn new(receivers: Vec<Receiver<Event>>, mode: CheckpointingMode) -> Self {
        InputGate {
            channels: receivers
                .into_iter()
                .map(|receiver| Channel {
                    receiver,
                    watermark: Timestamp::MIN,
                    ended: false,
                    arrived: false,
                })
                .collect(),
            mode,
            next: 0,
            emitted: Timestamp::MIN,
            alignment: None,
        }
    }

    /// The next input, or `None` once every channel has ended.
    pub async fn next(&mut self) -> Result<Option<Input>> {
        loop {
            let Some((index, event)) = self.poll_any().await else {
                return Ok(None);
            };
            match event {
                Some(Event::Data(chunk)) => return Ok(Some(Input::Data(chunk))),
                Some(Event::Watermark(t)) => {
                    let channel = &mut self.channels[index];
                    channel.watermark = channel.watermark.max(t);
                }
                Some(Event::Barrier(barrier)) => self.barrier_arrived(index, barrier),
                Some(Event::EndOfStream) => self.channels[index].ended = true,
                None => {
                    return Err(EddyError::Runtime(format!(
                        "input channel {index} closed before its end of stream (the upstream task stopped)"
                    )));
                }
            }
            if let Some(aligned) = self.completed_alignment() {
                return Ok(Some(aligned));
            }
            if let Some(t) = self.combined_watermark() {
                return Ok(Some(Input::Watermark(t)));
            }
        }
    }

    fn barrier_arrived(&mut self, index: usize, barrier: Barrier) {
        let current = self.alignment.as_ref().map(|a| a.barrier.checkpoint);
        match current {
            Some(n) if barrier.checkpoint < n => return, // a stale barrier of an aborted checkpoint
            Some(n) if barrier.checkpoint == n => {}
            _ => {
                // A new checkpoint (one still aligning was aborted upstream): start over.
                for channel in &mut self.channels {
                    channel.arrived = false;
                }
                self.alignment = Some(Alignment {
                    barrier,
                    started: Instant::now(),
                });
            }
        }
        self.channels[index].arrived = true;
    }

    fn completed_alignment(&mut self) -> Option<Input> {
        let alignment = self.alignment.as_ref()?;
        if self.channels.iter().any(|c| !c.ended && !c.arrived) {
            return None;
        }
        let input = Input::Barrier {
            barrier: alignment.barrier,
            aligned_for: alignment.started.elapsed(),
        };
        self.alignment = None;
        for channel in &mut self.channels {
            channel.arrived = false;
        }
        Some(input)
    }

    fn combined_watermark(&mut self) -> Option<Timestamp> {
        let min = self
            .channels
            .iter()
            .filter(|c| !c.ended)
            .map(|c| c.watermark)
            .min()?;
        if min > self.emitted {
            self.emitted = min;
            return Some(min);
        }
        None
    }

    /// Waits for an event on any channel that is open and not held back for alignment,
    /// starting after the last one served.
    async fn poll_any(&mut self) -> Option<(usize, Option<Event>)> {
        let hold_back = self.mode == CheckpointingMode::ExactlyOnce && self.alignment.is_some();
        poll_fn(|cx| {
            let n = self.channels.len();
            let mut open = false;
            for k in 0..n {
                let i = (self.next + k) % n;
                let channel = &mut self.channels[i];
                if channel.ended || (hold_back && channel.arrived) {
                    continue;
                }
                open = true;
                if let Poll::Ready(event) = channel.receiver.poll_recv(cx) {
                    self.next = i + 1;
                    return Poll::Ready(Some((i, event)));
                }
            }
            if open {
                Poll::Pending
            } else {
                Poll::Ready(None)
            }
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::Int64Array;
    use arrow::datatypes::{DataType, Field, Schema};
    use arrow::record_batch::RecordBatch;
    use tokio::sync::mpsc::{Sender, channel};

    use super::*;

    fn barrier(n: u64) -> Event {
        Event::Barrier(Barrier {
            checkpoint: n,
            triggered_at: 0,
        })
    }

    fn data(v: i64) -> Event {
        let schema = Arc::new(Schema::new(vec![Field::new("v", DataType::Int64, false)]));
        Event::Data(Chunk::inserts(
            RecordBatch::try_new(schema, vec![Arc::new(Int64Array::from(vec![v]))]).unwrap(),
        ))
    }

    fn value(input: &Input) -> String {
        match input {
            Input::Data(chunk) => {
                let values = chunk
                    .rows()
                    .column(0)
                    .as_any()
                    .downcast_ref::<Int64Array>()
                    .unwrap();
                values.value(0).to_string()
            }
            Input::Watermark(t) => format!("wm{t}"),
            Input::Barrier { barrier, .. } => format!("b{}", barrier.checkpoint),
        }
    }

    async fn drain(gate: &mut InputGate) -> Vec<String> {
        let mut seen = Vec::new();
        while let Some(input) = gate.next().await.unwrap() {
            seen.push(value(&input));
        }
        seen
    }

    async fn two_channels(mode: CheckpointingMode) -> (InputGate, Sender<Event>, Sender<Event>) {
        let (a_tx, a_rx) = channel(16);
        let (b_tx, b_rx) = channel(16);
        (InputGate::new(vec![a_rx, b_rx], mode), a_tx, b_tx)
    }

    #[tokio::test]
    async fn watermark_is_the_minimum_of_open_channels() {
        let (mut gate, a, b) = two_channels(CheckpointingMode::ExactlyOnce).await;
        a.send(Event::Watermark(10)).await.unwrap();
        b.send(Event::Watermark(5)).await.unwrap();
        a.send(Event::EndOfStream).await.unwrap();
        b.send(Event::Watermark(20)).await.unwrap();
        b.send(Event::EndOfStream).await.unwrap();
        // 5 once both channels reported; 20 once the first ended and the second moved on.
        assert_eq!(drain(&mut gate).await, vec!["wm5", "wm20"]);
    }

    #[tokio::test]
    async fn aligned_barrier_holds_back_records_after_it() {
        let (mut gate, a, b) = two_channels(CheckpointingMode::ExactlyOnce).await;
        // Channel a delivers its barrier first; its record 2 belongs after the checkpoint
        // and must not be read before b's barrier.
        for event in [data(1), barrier(1), data(2), Event::EndOfStream] {
            a.send(event).await.unwrap();
        }
        for event in [data(10), data(11), barrier(1), data(12), Event::EndOfStream] {
            b.send(event).await.unwrap();
        }
        let seen = drain(&mut gate).await;
        let at = seen.iter().position(|s| s == "b1").unwrap();
        let mut before: Vec<&str> = seen[..at].iter().map(String::as_str).collect();
        before.sort();
        assert_eq!(before, vec!["1", "10", "11"]);
        let mut after: Vec<&str> = seen[at + 1..].iter().map(String::as_str).collect();
        after.sort();
        assert_eq!(after, vec!["12", "2"]);
    }

    #[tokio::test]
    async fn unaligned_mode_lets_records_overtake_but_still_yields_the_barrier_once() {
        let (mut gate, a, b) = two_channels(CheckpointingMode::AtLeastOnce).await;
        for event in [barrier(1), data(2), data(3)] {
            a.send(event).await.unwrap();
        }
        // Without alignment, a's records are read while b has not delivered its barrier.
        let mut seen = Vec::new();
        for _ in 0..2 {
            seen.push(value(&gate.next().await.unwrap().unwrap()));
        }
        assert_eq!(seen, vec!["2", "3"]);
        b.send(barrier(1)).await.unwrap();
        assert_eq!(value(&gate.next().await.unwrap().unwrap()), "b1");
        a.send(Event::EndOfStream).await.unwrap();
        b.send(Event::EndOfStream).await.unwrap();
        assert!(gate.next().await.unwrap().is_none());
    }

    #[tokio::test]
    async fn an_ended_channel_does_not_hold_a_barrier_back() {
        let (mut gate, a, b) = two_channels(CheckpointingMode::ExactlyOnce).await;
        a.send(Event::EndOfStream).await.unwrap();
        b.send(barrier(7)).await.unwrap();
        assert_eq!(value(&gate.next().await.unwrap().unwrap()), "b7");
    }

    #[tokio::test]
    async fn a_channel_closed_without_end_of_stream_is_an_error() {
        let (tx, rx) = channel::<Event>(1);
        drop(tx);
        let mut gate = InputGate::new(vec![rx], CheckpointingMode::ExactlyOnce);
        assert!(gate.next().await.is_err());
    }
}
