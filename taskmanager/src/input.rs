//! The input gate of a task: merges its input channels fairly, combines their watermarks
//! (the minimum over channels still open), aligns checkpoint barriers, and ends when every
//! channel has ended.
//!
//! Alignment (exactly-once): once barrier `n` has arrived on a channel, that channel is not
//! read until barrier `n` has arrived on every open channel; then the gate yields the
//! barrier and reads all channels again. Without alignment (at-least-once) channels keep
//! being read, and the barrier is yielded when the last one arrives.
//!
//! Unaligned: the first copy of barrier `n` to arrive, on a priority lane or in a channel,
//! starts the snapshot at once; the data each channel sent before its barrier and the
//! snapshot did not hold is the checkpoint's in-flight data. A barrier's copy in the
//! channel comes right behind that data, so no row sent after a barrier is read before
//! the gate knows of the barrier, however late its priority copy.

use std::collections::VecDeque;
use std::future::poll_fn;
use std::task::Poll;
use std::time::{Duration, Instant};

use eddy_common::chunk::Chunk;
use eddy_common::config::checkpointing::CheckpointingMode;
use eddy_common::event::{Barrier, Event, StreamEnd, Timestamp};
use eddy_common::{EddyError, Result};
use tokio::sync::mpsc::{Receiver, UnboundedReceiver};

use crate::exchange::{InputChannel, PriorityBarrier};

/// What the gate yields.
#[derive(Debug)]
pub enum Input {
    /// Rows from a channel of input `input` (the index of its sending vertex among the
    /// task's inputs).
    Data {
        /// Which input.
        input: usize,
        /// The rows.
        chunk: Chunk,
    },
    /// The combined watermark advanced.
    Watermark(Timestamp),
    /// Snapshot now. Aligned: barrier `n` has arrived on every open channel, and
    /// `aligned_for` is how long the first channel was held back. Unaligned: the first
    /// barrier `n` arrived; the in-flight data follows in [`Input::InFlight`].
    Barrier {
        /// The barrier.
        barrier: Barrier,
        /// Time from the first to the last arrival of this barrier.
        aligned_for: Duration,
    },
    /// Unaligned checkpoint `n`: every channel's data sent before its barrier has arrived;
    /// these are the chunks that were in flight at the snapshot (already processed too).
    InFlight {
        /// The checkpoint.
        checkpoint: u64,
        /// The chunks with the input each came from, to store with the snapshot and
        /// replay on restore.
        chunks: Vec<(usize, Chunk)>,
    },
}

struct Channel {
    receiver: Receiver<Event>,
    /// Which input of the task it belongs to.
    input: usize,
    priority: UnboundedReceiver<PriorityBarrier>,
    watermark: Timestamp,
    ended: bool,
    /// Has delivered the aligned barrier being aligned.
    arrived: bool,
    /// Data events taken from the receiver so far (their sequence numbers).
    received: u64,
    /// Events taken from the receiver ahead of processing (an unaligned checkpoint copies
    /// its in-flight data without waiting for it to be processed), each with the data
    /// events taken before it (a data event's sequence number).
    prefetched: VecDeque<(u64, Event)>,
    /// The receiver has closed.
    closed: bool,
}

/// The barrier being aligned.
struct Alignment {
    barrier: Barrier,
    started: Instant,
}

/// An unaligned checkpoint collecting its in-flight data.
struct InFlight {
    checkpoint: u64,
    /// Per channel, the data events its sender had sent before the barrier, once known.
    sent_before: Vec<Option<u64>>,
    /// Per channel, data events received when the snapshot was taken.
    received_at_snapshot: Vec<u64>,
    /// (channel, sequence number, chunk) of every in-flight data event received.
    logged: Vec<(usize, u64, Chunk)>,
}

enum Polled {
    /// An event of channel `.0` (`None`: the channel closed), with the data events taken
    /// from that channel before it.
    Data(usize, Option<Event>, u64),
    Priority(usize, PriorityBarrier),
    /// In-flight data was copied ahead of processing: an unaligned checkpoint may be done.
    Prefetched,
}

/// Merges a task's input channels.
pub struct InputGate {
    channels: Vec<Channel>,
    mode: CheckpointingMode,
    next: usize,
    emitted: Timestamp,
    alignment: Option<Alignment>,
    in_flight: Option<InFlight>,
    /// The newest unaligned checkpoint started.
    unaligned_started: u64,
    /// How the channels that ended so far ended, combined.
    end: StreamEnd,
}

impl InputGate {
    /// How full the queue of the channel served last is: (events queued, capacity).
    pub fn last_queue_fill(&self) -> (usize, usize) {
        let n = self.channels.len();
        match n {
            0 => (0, 0),
            _ => {
                let channel = &self.channels[(self.next + n - 1) % n];
                (channel.receiver.len(), channel.receiver.max_capacity())
            }
        }
    }

    /// A gate over `inputs`, aligning barriers as `mode` says.
    pub fn new(inputs: Vec<InputChannel>, mode: CheckpointingMode) -> Self {
        InputGate {
            channels: inputs
                .into_iter()
                .map(|input| Channel {
                    receiver: input.data,
                    input: input.input,
                    priority: input.priority,
                    watermark: Timestamp::MIN,
                    ended: false,
                    arrived: false,
                    received: 0,
                    prefetched: VecDeque::new(),
                    closed: false,
                })
                .collect(),
            mode,
            next: 0,
            emitted: Timestamp::MIN,
            alignment: None,
            in_flight: None,
            unaligned_started: 0,
            end: StreamEnd::Finished,
        }
    }

    /// Why the input ended, once [`InputGate::next`] returned `None`: finished only if
    /// every channel's stream finished.
    pub fn end(&self) -> StreamEnd {
        self.end
    }

    /// The next input, or `None` once every channel has ended.
    pub async fn next(&mut self) -> Result<Option<Input>> {
        loop {
            if let Some(done) = self.completed_in_flight() {
                return Ok(Some(done));
            }
            let Some(polled) = self.poll_any().await else {
                return Ok(None);
            };
            let (index, event, position) = match polled {
                Polled::Priority(index, priority) => {
                    if let Some(start) =
                        self.unaligned_barrier(index, priority.barrier, priority.sent)
                    {
                        return Ok(Some(start));
                    }
                    continue;
                }
                Polled::Prefetched => continue,
                Polled::Data(index, event, position) => (index, event, position),
            };
            match event {
                Some(Event::Data(chunk)) => {
                    let input = self.channels[index].input;
                    return Ok(Some(Input::Data { input, chunk }));
                }
                Some(Event::Watermark(t)) => {
                    let channel = &mut self.channels[index];
                    channel.watermark = channel.watermark.max(t);
                }
                Some(Event::Barrier(barrier)) if barrier.unaligned => {
                    if let Some(start) = self.unaligned_barrier(index, barrier, position) {
                        return Ok(Some(start));
                    }
                }
                Some(Event::Barrier(barrier)) => self.barrier_arrived(index, barrier),
                Some(Event::End(end)) => {
                    self.channels[index].ended = true;
                    self.end = self.end.and(end);
                }
                None => {
                    return Err(EddyError::Exchange(format!(
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

    /// Counts an event taken from channel `index` and logs it if it is data in flight for
    /// an unaligned checkpoint; returns the data events taken from the channel before it.
    fn record(
        channel: &mut Channel,
        in_flight: Option<&mut InFlight>,
        index: usize,
        event: &Event,
    ) -> u64 {
        let sequence = channel.received;
        let Event::Data(chunk) = event else {
            return sequence;
        };
        channel.received += 1;
        if let Some(in_flight) = in_flight
            && sequence >= in_flight.received_at_snapshot[index]
            && in_flight.sent_before[index].is_none_or(|sent| sequence < sent)
        {
            in_flight.logged.push((index, sequence, chunk.clone()));
        }
        sequence
    }

    /// A copy of an unaligned barrier arrived on channel `index`, which sent `sent` data
    /// events before it; returns the snapshot signal when it starts a checkpoint.
    fn unaligned_barrier(&mut self, index: usize, barrier: Barrier, sent: u64) -> Option<Input> {
        if self.channels[index].ended {
            return None;
        }
        let checkpoint = barrier.checkpoint;
        let started = match &self.in_flight {
            Some(current) if current.checkpoint == checkpoint => false,
            // Stale, or the other copy of a barrier whose checkpoint is already done here.
            _ if checkpoint <= self.unaligned_started => return None,
            _ => {
                // The first barrier of a new checkpoint (an unfinished one was aborted).
                self.in_flight = Some(self.start_in_flight(checkpoint));
                self.unaligned_started = checkpoint;
                true
            }
        };
        let in_flight = self.in_flight.as_mut().expect("in-flight checkpoint");
        if in_flight.sent_before[index].is_some() {
            return None; // its other copy came first
        }
        in_flight.sent_before[index] = Some(sent);
        // Events already logged past the barrier's position belong after it.
        in_flight
            .logged
            .retain(|(channel, sequence, _)| *channel != index || *sequence < sent);
        started.then_some(Input::Barrier {
            barrier,
            aligned_for: Duration::ZERO,
        })
    }

    /// Starts collecting checkpoint `checkpoint`'s in-flight data as its snapshot is
    /// taken: what each channel sends from now until its barrier, and what was taken from
    /// the channels ahead of processing and is not in the snapshot either.
    fn start_in_flight(&self, checkpoint: u64) -> InFlight {
        let mut logged = Vec::new();
        let mut processed = Vec::with_capacity(self.channels.len());
        for (index, channel) in self.channels.iter().enumerate() {
            for (sequence, event) in &channel.prefetched {
                if let Event::Data(chunk) = event {
                    logged.push((index, *sequence, chunk.clone()));
                }
            }
            let first_unprocessed = channel.prefetched.front().map(|(taken, _)| *taken);
            processed.push(first_unprocessed.unwrap_or(channel.received));
        }
        InFlight {
            checkpoint,
            sent_before: vec![None; self.channels.len()],
            received_at_snapshot: processed,
            logged,
        }
    }

    fn completed_in_flight(&mut self) -> Option<Input> {
        let in_flight = self.in_flight.as_ref()?;
        let complete = self.channels.iter().enumerate().all(|(i, c)| {
            c.ended || c.closed || in_flight.sent_before[i].is_some_and(|sent| c.received >= sent)
        });
        if !complete {
            return None;
        }
        let in_flight = self.in_flight.take().expect("in-flight checkpoint");
        Some(Input::InFlight {
            checkpoint: in_flight.checkpoint,
            chunks: in_flight
                .logged
                .into_iter()
                .map(|(channel, _, chunk)| (self.channels[channel].input, chunk))
                .collect(),
        })
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

    /// Waits for a priority barrier, or an event on any channel that is open and not held
    /// back for alignment, starting after the last one served. Channels with in-flight data
    /// still to arrive for an unaligned checkpoint are drained into their prefetch buffers
    /// first, so the checkpoint need not wait for that data to be processed.
    async fn poll_any(&mut self) -> Option<Polled> {
        let hold_back = self.mode == CheckpointingMode::ExactlyOnce && self.alignment.is_some();
        poll_fn(|cx| {
            let n = self.channels.len();
            for (i, channel) in self.channels.iter_mut().enumerate() {
                if !channel.ended
                    && let Poll::Ready(Some(priority)) = channel.priority.poll_recv(cx)
                {
                    return Poll::Ready(Some(Polled::Priority(i, priority)));
                }
            }
            if let Some(in_flight) = self.in_flight.as_mut() {
                let mut progressed = false;
                for (i, channel) in self.channels.iter_mut().enumerate() {
                    let Some(sent) = in_flight.sent_before[i] else {
                        continue;
                    };
                    while !channel.closed && channel.received < sent {
                        match channel.receiver.poll_recv(cx) {
                            Poll::Ready(Some(event)) => {
                                let taken = Self::record(channel, Some(&mut *in_flight), i, &event);
                                channel.prefetched.push_back((taken, event));
                                progressed = true;
                            }
                            Poll::Ready(None) => channel.closed = true,
                            Poll::Pending => break,
                        }
                    }
                }
                let complete = self.channels.iter().enumerate().all(|(i, c)| {
                    c.ended || c.closed || in_flight.sent_before[i].is_some_and(|s| c.received >= s)
                });
                if progressed && complete {
                    return Poll::Ready(Some(Polled::Prefetched));
                }
            }
            let mut open = false;
            for k in 0..n {
                let i = (self.next + k) % n;
                let channel = &mut self.channels[i];
                if channel.ended || (hold_back && channel.arrived) {
                    continue;
                }
                open = true;
                if let Some((taken, event)) = channel.prefetched.pop_front() {
                    self.next = i + 1;
                    return Poll::Ready(Some(Polled::Data(i, Some(event), taken)));
                }
                if channel.closed {
                    self.next = i + 1;
                    return Poll::Ready(Some(Polled::Data(i, None, channel.received)));
                }
                if let Poll::Ready(event) = channel.receiver.poll_recv(cx) {
                    let taken = match &event {
                        Some(event) => Self::record(channel, self.in_flight.as_mut(), i, event),
                        None => channel.received,
                    };
                    self.next = i + 1;
                    return Poll::Ready(Some(Polled::Data(i, event, taken)));
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
    use tokio::sync::mpsc::Sender;

    use crate::exchange::{OutputChannel, local_channel};

    use super::*;

    fn barrier(n: u64) -> Event {
        Event::Barrier(Barrier {
            checkpoint: n,
            triggered_at: 0,
            unaligned: false,
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
            Input::Data { input, chunk } => {
                let values = chunk
                    .rows()
                    .column(0)
                    .as_any()
                    .downcast_ref::<Int64Array>()
                    .unwrap();
                match input {
                    0 => values.value(0).to_string(),
                    _ => format!("{input}:{}", values.value(0)),
                }
            }
            Input::Watermark(t) => format!("wm{t}"),
            Input::Barrier { barrier, .. } => format!("b{}", barrier.checkpoint),
            Input::InFlight { checkpoint, .. } => format!("f{checkpoint}"),
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
        let (a_tx, a_rx) = local_channel(16);
        let (b_tx, b_rx) = local_channel(16);
        (InputGate::new(vec![a_rx, b_rx], mode), a_tx.data, b_tx.data)
    }

    #[tokio::test]
    async fn watermark_is_the_minimum_of_open_channels() {
        let (mut gate, a, b) = two_channels(CheckpointingMode::ExactlyOnce).await;
        a.send(Event::Watermark(10)).await.unwrap();
        b.send(Event::Watermark(5)).await.unwrap();
        a.send(Event::End(StreamEnd::Finished)).await.unwrap();
        b.send(Event::Watermark(20)).await.unwrap();
        b.send(Event::End(StreamEnd::Finished)).await.unwrap();
        // 5 once both channels reported; 20 once the first ended and the second moved on.
        assert_eq!(drain(&mut gate).await, vec!["wm5", "wm20"]);
    }

    #[tokio::test]
    async fn the_input_finished_only_if_every_channel_finished() {
        use StreamEnd::{Cancelled, Finished, Stopped};
        for (a_end, b_end, expected) in [
            (Finished, Finished, Finished),
            (Finished, Stopped, Stopped),
            (Stopped, Finished, Stopped),
            (Cancelled, Stopped, Cancelled),
            (Finished, Cancelled, Cancelled),
        ] {
            let (mut gate, a, b) = two_channels(CheckpointingMode::ExactlyOnce).await;
            a.send(data(1)).await.unwrap();
            a.send(Event::End(a_end)).await.unwrap();
            b.send(Event::End(b_end)).await.unwrap();
            assert_eq!(drain(&mut gate).await, vec!["1"]);
            assert_eq!(gate.end(), expected, "{a_end:?} and {b_end:?}");
        }
    }

    #[tokio::test]
    async fn aligned_barrier_holds_back_records_after_it() {
        let (mut gate, a, b) = two_channels(CheckpointingMode::ExactlyOnce).await;
        // Channel a delivers its barrier first; its record 2 belongs after the checkpoint
        // and must not be read before b's barrier.
        for event in [
            data(1),
            barrier(1),
            data(2),
            Event::End(StreamEnd::Finished),
        ] {
            a.send(event).await.unwrap();
        }
        for event in [
            data(10),
            data(11),
            barrier(1),
            data(12),
            Event::End(StreamEnd::Finished),
        ] {
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
        a.send(Event::End(StreamEnd::Finished)).await.unwrap();
        b.send(Event::End(StreamEnd::Finished)).await.unwrap();
        assert!(gate.next().await.unwrap().is_none());
    }

    fn priority(tx: &OutputChannel, n: u64, sent: u64) {
        let barrier = Barrier {
            checkpoint: n,
            triggered_at: 0,
            unaligned: true,
        };
        tx.priority.send(PriorityBarrier { barrier, sent }).unwrap();
    }

    #[tokio::test]
    async fn an_unaligned_barrier_overtakes_queued_data_which_is_logged() {
        let (a, a_rx) = local_channel(16);
        let (b, mut b_rx) = local_channel(16);
        b_rx.input = 1;
        let mut gate = InputGate::new(vec![a_rx, b_rx], CheckpointingMode::ExactlyOnce);
        for v in [1, 2] {
            a.data.send(data(v)).await.unwrap();
        }
        for v in [10, 11, 12] {
            b.data.send(data(v)).await.unwrap();
        }
        // The barrier was sent after a's two rows: it overtakes them, and the snapshot
        // comes before any row is read.
        priority(&a, 1, 2);
        assert_eq!(value(&gate.next().await.unwrap().unwrap()), "b1");
        let mut rows = Vec::new();
        for _ in 0..5 {
            rows.push(value(&gate.next().await.unwrap().unwrap()));
        }
        rows.sort();
        assert_eq!(rows, vec!["1", "1:10", "1:11", "1:12", "2"]);
        // b's barrier was sent after two of its rows: 12 came after it, so is not in flight.
        priority(&b, 1, 2);
        a.data.send(Event::End(StreamEnd::Finished)).await.unwrap();
        b.data.send(Event::End(StreamEnd::Finished)).await.unwrap();
        let Some(Input::InFlight { checkpoint, chunks }) = gate.next().await.unwrap() else {
            panic!("expected the in-flight data");
        };
        assert_eq!(checkpoint, 1);
        let mut logged: Vec<String> = chunks
            .into_iter()
            .map(|(input, chunk)| value(&Input::Data { input, chunk }))
            .collect();
        logged.sort();
        assert_eq!(logged, vec!["1", "1:10", "1:11", "2"]);
        assert!(gate.next().await.unwrap().is_none());
    }

    fn unaligned(n: u64) -> Event {
        Event::Barrier(Barrier {
            checkpoint: n,
            triggered_at: 0,
            unaligned: true,
        })
    }

    fn in_flight_rows(input: Option<Input>) -> (u64, Vec<String>) {
        let Some(Input::InFlight { checkpoint, chunks }) = input else {
            panic!("expected the in-flight data, got {input:?}");
        };
        let mut rows: Vec<String> = chunks
            .into_iter()
            .map(|(input, chunk)| value(&Input::Data { input, chunk }))
            .collect();
        rows.sort();
        (checkpoint, rows)
    }

    #[tokio::test]
    async fn rows_sent_after_an_unaligned_barrier_wait_for_it_however_late_its_priority_copy() {
        // Between TaskManagers the priority copy travels apart from the data: here it has
        // not come yet, and the row sent after the barrier must not be read before the
        // snapshot (it would be in the snapshot and sent again after a restore).
        let (a, a_rx) = local_channel(16);
        let (b, b_rx) = local_channel(16);
        let mut gate = InputGate::new(vec![a_rx, b_rx], CheckpointingMode::ExactlyOnce);
        for event in [data(1), unaligned(1), data(2)] {
            a.data.send(event).await.unwrap();
        }
        b.data.send(data(10)).await.unwrap();
        let mut seen = Vec::new();
        while seen.len() < 4 {
            seen.push(value(&gate.next().await.unwrap().unwrap()));
        }
        let at = |row: &str| seen.iter().position(|s| s == row).unwrap();
        assert!(at("1") < at("b1") && at("b1") < at("2"), "{seen:?}");
        // The late priority copy changes nothing; b's barrier completes the checkpoint.
        priority(&a, 1, 1);
        priority(&b, 1, 1);
        let (checkpoint, rows) = in_flight_rows(gate.next().await.unwrap());
        assert_eq!(checkpoint, 1);
        let expected: Vec<String> = if at("10") > at("b1") {
            vec!["10".into()]
        } else {
            vec![]
        };
        assert_eq!(rows, expected);
        // The channel copy of b's barrier, behind its row, is the other copy: ignored.
        b.data.send(unaligned(1)).await.unwrap();
        a.data.send(Event::End(StreamEnd::Finished)).await.unwrap();
        b.data.send(Event::End(StreamEnd::Finished)).await.unwrap();
        assert!(gate.next().await.unwrap().is_none());
    }

    #[tokio::test]
    async fn rows_taken_ahead_for_one_checkpoint_are_in_flight_for_the_next() {
        let (a, a_rx) = local_channel(16);
        let (b, b_rx) = local_channel(16);
        let mut gate = InputGate::new(vec![a_rx, b_rx], CheckpointingMode::ExactlyOnce);
        for v in [10, 11] {
            b.data.send(data(v)).await.unwrap();
        }
        priority(&a, 1, 0);
        assert_eq!(value(&gate.next().await.unwrap().unwrap()), "b1");
        // b's barrier of checkpoint 1 comes after its two rows: they are taken ahead of
        // processing to complete checkpoint 1.
        priority(&b, 1, 2);
        assert_eq!(
            in_flight_rows(gate.next().await.unwrap()),
            (1, vec!["10".into(), "11".into()])
        );
        // Checkpoint 2 starts before they are processed: not in its snapshot, so in its
        // in-flight data too.
        priority(&a, 2, 0);
        assert_eq!(value(&gate.next().await.unwrap().unwrap()), "b2");
        priority(&b, 2, 2);
        assert_eq!(
            in_flight_rows(gate.next().await.unwrap()),
            (2, vec!["10".into(), "11".into()])
        );
        assert_eq!(value(&gate.next().await.unwrap().unwrap()), "10");
        assert_eq!(value(&gate.next().await.unwrap().unwrap()), "11");
    }

    #[tokio::test]
    async fn an_ended_channel_does_not_hold_a_barrier_back() {
        let (mut gate, a, b) = two_channels(CheckpointingMode::ExactlyOnce).await;
        a.send(Event::End(StreamEnd::Finished)).await.unwrap();
        b.send(barrier(7)).await.unwrap();
        assert_eq!(value(&gate.next().await.unwrap().unwrap()), "b7");
    }

    #[tokio::test]
    async fn a_channel_closed_without_end_of_stream_is_an_error() {
        let (tx, rx) = local_channel(1);
        drop(tx);
        let mut gate = InputGate::new(vec![rx], CheckpointingMode::ExactlyOnce);
        assert!(gate.next().await.is_err());
    }
}
