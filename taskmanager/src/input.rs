//! The input gate of a task: merges its input channels fairly, combines their watermarks
//! (the minimum over channels still open), and ends when every channel has ended.

use std::future::poll_fn;
use std::task::Poll;

use eddy_common::chunk::Chunk;
use eddy_common::event::{Event, Timestamp};
use eddy_common::{EddyError, Result};
use tokio::sync::mpsc::Receiver;

/// What the gate yields.
#[derive(Debug)]
pub enum Input {
    /// Rows from some channel.
    Data(Chunk),
    /// The combined watermark advanced.
    Watermark(Timestamp),
}

struct Channel {
    receiver: Receiver<Event>,
    watermark: Timestamp,
    ended: bool,
}

/// Merges a task's input channels.
pub struct InputGate {
    channels: Vec<Channel>,
    next: usize,
    emitted: Timestamp,
}

impl InputGate {
    /// A gate over `receivers`.
    pub fn new(receivers: Vec<Receiver<Event>>) -> Self {
        InputGate {
            channels: receivers
                .into_iter()
                .map(|receiver| Channel {
                    receiver,
                    watermark: Timestamp::MIN,
                    ended: false,
                })
                .collect(),
            next: 0,
            emitted: Timestamp::MIN,
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
                Some(Event::EndOfStream) => self.channels[index].ended = true,
                None => {
                    return Err(EddyError::Runtime(format!(
                        "input channel {index} closed before its end of stream (the upstream task stopped)"
                    )));
                }
            }
            if let Some(t) = self.combined_watermark() {
                return Ok(Some(Input::Watermark(t)));
            }
        }
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

    /// Waits for an event on any open channel, starting after the last one served.
    async fn poll_any(&mut self) -> Option<(usize, Option<Event>)> {
        poll_fn(|cx| {
            let n = self.channels.len();
            let mut open = false;
            for k in 0..n {
                let i = (self.next + k) % n;
                let channel = &mut self.channels[i];
                if channel.ended {
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
    use super::*;
    use tokio::sync::mpsc::channel;

    #[tokio::test]
    async fn watermark_is_the_minimum_of_open_channels() {
        let (a_tx, a_rx) = channel(8);
        let (b_tx, b_rx) = channel(8);
        let mut gate = InputGate::new(vec![a_rx, b_rx]);
        a_tx.send(Event::Watermark(10)).await.unwrap();
        b_tx.send(Event::Watermark(5)).await.unwrap();
        a_tx.send(Event::EndOfStream).await.unwrap();
        b_tx.send(Event::Watermark(20)).await.unwrap();
        b_tx.send(Event::EndOfStream).await.unwrap();
        let mut seen = Vec::new();
        while let Some(input) = gate.next().await.unwrap() {
            if let Input::Watermark(t) = input {
                seen.push(t);
            }
        }
        // 5 once both channels reported; 20 once the first ended and the second moved on.
        assert_eq!(seen, vec![5, 20]);
    }

    #[tokio::test]
    async fn a_channel_closed_without_end_of_stream_is_an_error() {
        let (tx, rx) = channel::<Event>(1);
        drop(tx);
        let mut gate = InputGate::new(vec![rx]);
        assert!(gate.next().await.is_err());
    }
}
