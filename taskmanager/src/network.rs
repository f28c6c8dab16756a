//! Channels between TaskManagers. A sending task writes into a bounded queue; a forwarder
//! streams the queue's events to the receiving TaskManager in one `Transfer` call per
//! channel; there the call feeds the receiving task's bounded input queue, reading the next
//! frame only when the queue has room, so HTTP/2 flow control carries backpressure back to
//! the sender. Events of a channel keep their order.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use eddy_common::event::{Barrier, Event, StreamEnd};
use eddy_common::wire::{decode_chunk, encode_chunk};
use eddy_proto::tls::Tls;
use eddy_proto::v1 as pb;
use eddy_proto::v1::data_exchange_client::DataExchangeClient;
use tokio::sync::mpsc::{
    Receiver, Sender, UnboundedReceiver, UnboundedSender, channel, unbounded_channel,
};
use tokio::sync::watch;
use tonic::{Request, Response, Status, Streaming};

use crate::exchange::{ChannelEnds, InputChannel, OutputChannel, PriorityBarrier};

/// How long a transfer for a job not (yet) deployed here waits for its deployment: the
/// JobManager deploys to all TaskManagers at once, so senders may connect first.
const DEPLOY_WAIT: Duration = Duration::from_secs(10);

/// A channel of a job's execution.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ChannelKey {
    /// The execution (`{job}.{attempt}`).
    pub execution_id: String,
    /// The subtasks it connects.
    pub ends: ChannelEnds,
}

impl ChannelKey {
    fn to_proto(&self) -> pb::ChannelId {
        pb::ChannelId {
            execution_id: self.execution_id.clone(),
            from_vertex: self.ends.from_vertex as u32,
            from_subtask: self.ends.from_subtask as u32,
            to_vertex: self.ends.to_vertex as u32,
            to_subtask: self.ends.to_subtask as u32,
        }
    }

    fn from_proto(id: &pb::ChannelId) -> Self {
        ChannelKey {
            execution_id: id.execution_id.clone(),
            ends: ChannelEnds {
                from_vertex: id.from_vertex as usize,
                from_subtask: id.from_subtask as usize,
                to_vertex: id.to_vertex as usize,
                to_subtask: id.to_subtask as usize,
            },
        }
    }
}

/// Both ends of a channel until the task and the sender (local or a transfer) take them;
/// the priority lane's sender stays, for unaligned barriers arriving by RPC.
struct Slot {
    sender: Option<Sender<Event>>,
    receiver: Option<Receiver<Event>>,
    priority_sender: UnboundedSender<PriorityBarrier>,
    priority_receiver: Option<UnboundedReceiver<PriorityBarrier>>,
}

/// The input queues of this TaskManager's tasks (or of the in-process TaskManagers that
/// share them), by channel.
pub struct Channels {
    capacity: usize,
    slots: Mutex<HashMap<ChannelKey, Slot>>,
    /// The executions deployed here, each with the number of deployments of it that have
    /// not ended (in-process TaskManagers share the queues).
    jobs: watch::Sender<HashMap<String, usize>>,
    /// How streams to other TaskManagers are secured (mutual TLS), if at all.
    tls: Option<Tls>,
}

impl Channels {
    /// Queues holding at most `capacity` events.
    pub fn new(capacity: usize) -> Self {
        Channels {
            capacity,
            slots: Mutex::new(HashMap::new()),
            jobs: watch::Sender::new(HashMap::new()),
            tls: None,
        }
    }

    /// The same, streaming to other TaskManagers over mutual TLS with `tls`.
    pub fn with_tls(self, tls: Option<Tls>) -> Self {
        Channels { tls, ..self }
    }

    /// How streams to other TaskManagers are secured.
    pub fn tls(&self) -> Option<&Tls> {
        self.tls.as_ref()
    }

    fn with_slot<T>(&self, key: &ChannelKey, take: impl FnOnce(&mut Slot) -> T) -> T {
        let mut slots = self.slots.lock().expect("channels lock");
        let slot = slots.entry(key.clone()).or_insert_with(|| {
            let (tx, rx) = channel(self.capacity);
            let (priority_tx, priority_rx) = unbounded_channel();
            Slot {
                sender: Some(tx),
                receiver: Some(rx),
                priority_sender: priority_tx,
                priority_receiver: Some(priority_rx),
            }
        });
        take(slot)
    }

    /// Marks an execution as deployed here: transfers for it are accepted.
    pub fn open_job(&self, execution_id: &str) {
        self.jobs.send_modify(|jobs| {
            *jobs.entry(execution_id.to_string()).or_default() += 1;
        });
    }

    /// A deployment of an execution ended; once the last has, its channels are forgotten.
    pub fn close_job(&self, execution_id: &str) {
        let mut last = false;
        self.jobs
            .send_if_modified(|jobs| match jobs.get_mut(execution_id) {
                Some(open) if *open > 1 => {
                    *open -= 1;
                    false
                }
                Some(_) => {
                    jobs.remove(execution_id);
                    last = true;
                    true
                }
                None => false,
            });
        if last {
            self.slots
                .lock()
                .expect("channels lock")
                .retain(|k, _| k.execution_id != execution_id);
        }
    }

    fn is_open(&self, execution_id: &str) -> bool {
        self.jobs.borrow().contains_key(execution_id)
    }

    /// Waits up to `limit` for an execution to be deployed here; false if it was not.
    async fn wait_open(&self, execution_id: &str, limit: Duration) -> bool {
        let mut jobs = self.jobs.subscribe();
        let opened = jobs.wait_for(|jobs| jobs.contains_key(execution_id));
        matches!(tokio::time::timeout(limit, opened).await, Ok(Ok(_)))
    }

    /// The receiving end, for the task that reads the channel.
    pub fn take_receiver(&self, key: &ChannelKey) -> Option<InputChannel> {
        self.with_slot(key, |slot| {
            Some(InputChannel {
                data: slot.receiver.take()?,
                priority: slot.priority_receiver.take()?,
                input: 0,
            })
        })
    }

    /// The sending end, for a local sender or a transfer; there is only one.
    pub fn take_sender(&self, key: &ChannelKey) -> Option<OutputChannel> {
        self.with_slot(key, |slot| {
            Some(OutputChannel {
                data: slot.sender.take()?,
                priority: slot.priority_sender.clone(),
            })
        })
    }

    /// The priority lane of a channel, for unaligned barriers sent by RPC.
    fn priority_sender(&self, key: &ChannelKey) -> UnboundedSender<PriorityBarrier> {
        self.with_slot(key, |slot| slot.priority_sender.clone())
    }
}

/// The `DataExchange` service: accepts transfers into local input queues.
pub struct DataExchangeService {
    channels: Arc<Channels>,
}

impl DataExchangeService {
    /// A service feeding `channels`.
    pub fn new(channels: Arc<Channels>) -> Self {
        DataExchangeService { channels }
    }
}

fn decode_frame(frame: pb::Frame) -> Result<Event, Status> {
    match frame.event {
        Some(pb::frame::Event::Chunk(bytes)) => decode_chunk(bytes)
            .map(Event::Data)
            .map_err(|e| Status::invalid_argument(format!("bad data frame: {e}"))),
        Some(pb::frame::Event::Watermark(t)) => Ok(Event::Watermark(t)),
        Some(pb::frame::Event::End(end)) => decode_end(end).map(Event::End),
        Some(pb::frame::Event::Barrier(b)) => Ok(Event::Barrier(Barrier {
            checkpoint: b.checkpoint,
            triggered_at: b.triggered_at_ms,
            unaligned: b.unaligned,
        })),
        None => Err(Status::invalid_argument("a frame carries no event")),
    }
}

/// A stream end as a frame carries it; a frame that does not say why the stream ended is
/// refused (taking it for a finished input could commit rows twice).
fn decode_end(value: i32) -> Result<StreamEnd, Status> {
    match pb::StreamEnd::try_from(value) {
        Ok(pb::StreamEnd::Finished) => Ok(StreamEnd::Finished),
        Ok(pb::StreamEnd::Stopped) => Ok(StreamEnd::Stopped),
        Ok(pb::StreamEnd::Cancelled) => Ok(StreamEnd::Cancelled),
        Ok(pb::StreamEnd::Unspecified) | Err(_) => Err(Status::invalid_argument(format!(
            "a frame ends its stream without a known reason ({value})"
        ))),
    }
}

fn encode_end(end: StreamEnd) -> pb::StreamEnd {
    match end {
        StreamEnd::Finished => pb::StreamEnd::Finished,
        StreamEnd::Stopped => pb::StreamEnd::Stopped,
        StreamEnd::Cancelled => pb::StreamEnd::Cancelled,
    }
}

fn encode_frame(event: Event, channel: Option<pb::ChannelId>) -> eddy_common::Result<pb::Frame> {
    let event = match event {
        Event::Data(chunk) => pb::frame::Event::Chunk(encode_chunk(&chunk)?),
        Event::Watermark(t) => pb::frame::Event::Watermark(t),
        Event::End(end) => pb::frame::Event::End(encode_end(end) as i32),
        Event::Barrier(b) => pb::frame::Event::Barrier(pb::CheckpointBarrier {
            checkpoint: b.checkpoint,
            triggered_at_ms: b.triggered_at,
            unaligned: b.unaligned,
        }),
    };
    Ok(pb::Frame {
        channel,
        event: Some(event),
    })
}

#[tonic::async_trait]
impl pb::data_exchange_server::DataExchange for DataExchangeService {
    async fn transfer(
        &self,
        request: Request<Streaming<pb::Frame>>,
    ) -> Result<Response<pb::TransferSummary>, Status> {
        let mut frames = request.into_inner();
        let first = frames
            .message()
            .await?
            .ok_or_else(|| Status::invalid_argument("an empty transfer"))?;
        let id = first
            .channel
            .as_ref()
            .ok_or_else(|| Status::invalid_argument("the first frame names no channel"))?;
        let key = ChannelKey::from_proto(id);
        if !self
            .channels
            .wait_open(&key.execution_id, DEPLOY_WAIT)
            .await
        {
            return Err(Status::not_found(format!(
                "job {} is not deployed here",
                key.execution_id
            )));
        }
        let sender = self
            .channels
            .take_sender(&key)
            .map(|output| output.data)
            .ok_or_else(|| {
                Status::already_exists(format!(
                    "channel {:?} is already being transferred",
                    key.ends
                ))
            })?;
        let mut count = 0u64;
        let mut next = Some(first);
        loop {
            let frame = match next.take() {
                Some(frame) => frame,
                None => match frames.message().await? {
                    Some(frame) => frame,
                    None => break,
                },
            };
            count += 1;
            let event = decode_frame(frame)?;
            let end = matches!(event, Event::End(_));
            sender
                .send(event)
                .await
                .map_err(|_| Status::cancelled("the receiving task is gone"))?;
            if end {
                break;
            }
        }
        Ok(Response::new(pb::TransferSummary { frames: count }))
    }

    async fn priority_barrier(
        &self,
        request: Request<pb::PriorityBarrierRequest>,
    ) -> Result<Response<pb::PriorityBarrierResponse>, Status> {
        let request = request.into_inner();
        let (Some(id), Some(barrier)) = (request.channel.as_ref(), request.barrier) else {
            return Err(Status::invalid_argument(
                "a priority barrier needs a channel and a barrier",
            ));
        };
        let key = ChannelKey::from_proto(id);
        if !self.channels.is_open(&key.execution_id) {
            return Err(Status::not_found(format!(
                "job {} is not deployed here",
                key.execution_id
            )));
        }
        let priority = PriorityBarrier {
            barrier: Barrier {
                checkpoint: barrier.checkpoint,
                triggered_at: barrier.triggered_at_ms,
                unaligned: true,
            },
            sent: request.sent,
        };
        self.channels
            .priority_sender(&key)
            .send(priority)
            .map_err(|_| Status::cancelled("the receiving task is gone"))?;
        Ok(Response::new(pb::PriorityBarrierResponse {}))
    }
}

/// A channel whose events are streamed to the TaskManager at `address`; its unaligned
/// barriers go by separate calls, overtaking the stream.
pub fn remote_sender(
    address: String,
    key: ChannelKey,
    capacity: usize,
    tls: Option<Tls>,
) -> OutputChannel {
    let (tx, rx) = channel(capacity);
    let (priority_tx, mut priority_rx) = unbounded_channel::<PriorityBarrier>();
    {
        let (address, key, tls) = (address.clone(), key.clone(), tls.clone());
        tokio::spawn(async move {
            if let Err(error) = forward(&address, &key, rx, tls.as_ref()).await {
                tracing::warn!(%address, channel = ?key.ends, %error, "data transfer failed");
            }
        });
    }
    tokio::spawn(async move {
        let mut client: Option<DataExchangeClient<tonic::transport::Channel>> = None;
        while let Some(priority) = priority_rx.recv().await {
            let request = pb::PriorityBarrierRequest {
                channel: Some(key.to_proto()),
                barrier: Some(pb::CheckpointBarrier {
                    checkpoint: priority.barrier.checkpoint,
                    triggered_at_ms: priority.barrier.triggered_at,
                    unaligned: true,
                }),
                sent: priority.sent,
            };
            if client.is_none() {
                client = dial(&address, tls.as_ref()).await.ok();
            }
            let sent = match client.as_mut() {
                Some(c) => c.priority_barrier(request).await.map(|_| ()),
                None => Err(Status::unavailable("cannot connect")),
            };
            if let Err(status) = sent {
                tracing::warn!(%address, channel = ?key.ends, %status, "priority barrier failed");
                client = None;
            }
        }
    });
    OutputChannel {
        data: tx,
        priority: priority_tx,
    }
}

/// A data exchange client connected to the TaskManager at `address`.
async fn dial(
    address: &str,
    tls: Option<&Tls>,
) -> Result<DataExchangeClient<tonic::transport::Channel>, tonic::transport::Error> {
    let channel = eddy_proto::tls::endpoint(address, tls)?
        .connect_timeout(Duration::from_secs(3))
        .connect()
        .await?;
    Ok(DataExchangeClient::new(channel))
}

async fn forward(
    address: &str,
    key: &ChannelKey,
    events: Receiver<Event>,
    tls: Option<&Tls>,
) -> Result<(), String> {
    let mut attempt = 0;
    let mut client = loop {
        match dial(address, tls).await {
            Ok(client) => break client,
            Err(e) if attempt < 20 => {
                attempt += 1;
                tracing::debug!(%address, error = %e, "connecting for a transfer, retrying");
                tokio::time::sleep(Duration::from_millis(100 * attempt)).await;
            }
            Err(e) => return Err(format!("cannot connect: {e}")),
        }
    };
    let channel = Some(key.to_proto());
    let frames =
        futures::stream::unfold((events, channel), |(mut events, mut channel)| async move {
            let event = events.recv().await?;
            match encode_frame(event, channel.take()) {
                Ok(frame) => Some((frame, (events, channel))),
                Err(error) => {
                    tracing::error!(%error, "cannot encode a chunk");
                    None
                }
            }
        });
    client
        .transfer(frames)
        .await
        .map(|_| ())
        .map_err(|status| format!("{}: {}", status.code(), status.message()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(execution: &str) -> ChannelKey {
        ChannelKey {
            execution_id: execution.into(),
            ends: ChannelEnds {
                from_vertex: 0,
                from_subtask: 0,
                to_vertex: 1,
                to_subtask: 0,
            },
        }
    }

    #[tokio::test]
    async fn shared_channels_stay_until_the_last_deployment_of_a_run_ends() {
        // Two in-process TaskManagers share the queues and deploy parts of one run.
        let channels = Channels::new(4);
        channels.open_job("j.1");
        channels.open_job("j.1");
        let receiver = channels.take_receiver(&key("j.1"));
        assert!(receiver.is_some());
        channels.close_job("j.1");
        assert!(channels.is_open("j.1"), "the other deployment still runs");
        // Its sender is still the one the receiver reads.
        assert!(channels.take_sender(&key("j.1")).is_some());
        channels.close_job("j.1");
        assert!(!channels.is_open("j.1"));
        // A later close (a cancel after the tasks ended) changes nothing.
        channels.close_job("j.1");
        assert!(!channels.is_open("j.1"));
    }

    #[tokio::test]
    async fn a_transfer_waits_for_its_deployment_without_polling() {
        let channels = Arc::new(Channels::new(4));
        let waiting = {
            let channels = channels.clone();
            tokio::spawn(async move { channels.wait_open("j.2", Duration::from_secs(5)).await })
        };
        tokio::task::yield_now().await;
        channels.open_job("j.2");
        assert!(waiting.await.unwrap());
        assert!(!channels.wait_open("j.3", Duration::from_millis(20)).await);
    }

    #[test]
    fn a_frame_keeps_why_its_stream_ended() {
        for end in [
            StreamEnd::Finished,
            StreamEnd::Stopped,
            StreamEnd::Cancelled,
        ] {
            let frame = encode_frame(Event::End(end), None).unwrap();
            assert!(matches!(decode_frame(frame), Ok(Event::End(e)) if e == end));
        }
    }

    #[test]
    fn an_end_without_a_known_reason_is_refused() {
        for value in [pb::StreamEnd::Unspecified as i32, 42] {
            let frame = pb::Frame {
                channel: None,
                event: Some(pb::frame::Event::End(value)),
            };
            let error = decode_frame(frame).unwrap_err();
            assert!(
                error.message().contains("without a known reason"),
                "{error}"
            );
        }
    }

    mod hostile {
        use proptest::collection::vec;
        use proptest::prelude::*;
        use prost::Message;

        use super::*;

        proptest! {
            #![proptest_config(eddy_common::fuzz::config("network::hostile_frames"))]

            /// Whatever bytes arrive as a DataExchange frame: protobuf decoding, then the
            /// frame's event, fail with a status or give an event, never panic.
            #[test]
            fn hostile_frames_never_panic(bytes in vec(any::<u8>(), 0..2048)) {
                if let Ok(frame) = pb::Frame::decode(bytes.as_slice()) {
                    let _ = decode_frame(frame);
                }
            }

            /// A frame whose chunk holds arbitrary bytes (a well-formed protobuf envelope
            /// around a hostile Arrow IPC message).
            #[test]
            fn hostile_chunks_never_panic(chunk in vec(any::<u8>(), 0..2048)) {
                let frame = pb::Frame {
                    channel: None,
                    event: Some(pb::frame::Event::Chunk(chunk)),
                };
                let bytes = frame.encode_to_vec();
                let frame = pb::Frame::decode(bytes.as_slice()).unwrap();
                let _ = decode_frame(frame);
            }
        }
    }
}
